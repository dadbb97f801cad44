"""The checkpoint: a structured, versioned summary of the turns a compaction folded away.

Fields, a summary's plus what a handoff needs (docs/COMPACTION.md, "Summaries and checkpoints"):
``objective``, ``completed``, ``in_progress``, ``pending`` (next steps), ``blockers``, ``decisions``
(with rationale), ``files_modified`` (path + what), ``important_details`` (identifiers verbatim) and
``last_user_request``, and ``narrative`` (what was done and why, in prose: a model's, or Claude Code's own
summary on import). A summarizer produces the fields — merged with the previous checkpoint's — and
``merge_checkpoint`` adds the bookkeeping (version, ``compaction_info``, ``stats``) and ``facts``: what
``compaction.facts`` read verbatim from the session's structure, carried beside whatever the summarizer
wrote so that no summary can drop the user's words, the todo list, the files or the open errors.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .errors import EngineError
from .facts import has_facts, render_facts

CHECKPOINT_FIELDS: tuple[str, ...] = (
    "objective",
    "completed",
    "in_progress",
    "pending",
    "blockers",
    "decisions",
    "files_modified",
    "important_details",
    "last_user_request",
    "narrative",
)
TEXT_FIELDS = ("objective", "last_user_request", "narrative")
LIST_FIELDS = ("completed", "in_progress", "pending", "blockers", "important_details")
MAX_ITEMS = 200  # per list: a summary that long is not a summary


class CheckpointError(EngineError):
    """A summary that does not fit the schema (a model's malformed reply, say)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, permanent=True, code="invalid_summary")


def empty_fields() -> dict[str, Any]:
    return {name: "" if name in TEXT_FIELDS else [] for name in CHECKPOINT_FIELDS}


def parse_json_object(text: str) -> dict[str, Any]:
    """The JSON object in a model's reply, tolerating a code fence or words around it. The plain
    readings come first, so a fence quoted inside a string value does not confuse it."""
    stripped = text.strip()
    candidates = [stripped]
    start, end = stripped.find("{"), stripped.rfind("}")
    if 0 <= start < end:
        candidates.append(stripped[start : end + 1])
    fenced = re.search(r"```(?:json)?\s*(\{.*?\})\s*```", stripped, re.DOTALL)
    if fenced:
        candidates.append(fenced.group(1))
    error: json.JSONDecodeError | None = None
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError as exc:
            error = error or exc
            continue
        if isinstance(value, dict):
            return value
    if start < 0 or end <= start:
        raise CheckpointError("The reply holds no JSON object.")
    if error is not None:
        raise CheckpointError(f"The reply is not valid JSON: {error.msg} at character {error.pos}.")
    raise CheckpointError("The reply's JSON is not an object.")


def validate_fields(raw: Any) -> dict[str, Any]:
    """The checkpoint fields in canonical shape, or ``CheckpointError`` saying what is wrong.

    Lenient where the meaning is plain (a decision given as a string, a file as a bare path, a
    missing list), strict where it is not (no objective, a list that is not a list)."""
    if not isinstance(raw, dict):
        raise CheckpointError("A checkpoint is a JSON object.")
    problems: list[str] = []
    out = empty_fields()
    for name in TEXT_FIELDS:
        value = raw.get(name, "")
        if value is None:
            value = ""
        if not isinstance(value, str):
            problems.append(f"'{name}' must be a string")
            continue
        out[name] = value.strip()
    if not out["objective"]:
        problems.append("'objective' is missing or empty")
    for name in LIST_FIELDS:
        value = raw.get(name, [])
        if value is None:
            value = []
        if not isinstance(value, list):
            problems.append(f"'{name}' must be a list of strings")
            continue
        out[name] = [_item_text(v) for v in value if _item_text(v)][:MAX_ITEMS]
    decisions = raw.get("decisions", []) or []
    if not isinstance(decisions, list):
        problems.append("'decisions' must be a list of {decision, rationale}")
    else:
        out["decisions"] = [d for d in (_decision(v) for v in decisions) if d["decision"]][:MAX_ITEMS]
    files = raw.get("files_modified", []) or []
    if not isinstance(files, list):
        problems.append("'files_modified' must be a list of {path, what}")
    else:
        out["files_modified"] = [f for f in (_file(v) for v in files) if f["path"]][:MAX_ITEMS]
    if problems:
        raise CheckpointError("The summary does not fit the checkpoint schema: " + "; ".join(problems) + ".")
    return out


def _item_text(value: Any) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, dict):
        return "; ".join(f"{k}: {v}" for k, v in value.items() if v not in (None, ""))
    if value is None:
        return ""
    return str(value)


def _decision(value: Any) -> dict[str, str]:
    if isinstance(value, dict):
        decision = value.get("decision") or value.get("what") or value.get("title") or ""
        return {"decision": str(decision).strip(), "rationale": str(value.get("rationale") or value.get("why") or "")}
    return {"decision": _item_text(value), "rationale": ""}


def _file(value: Any) -> dict[str, str]:
    if isinstance(value, dict):
        path = value.get("path") or value.get("file") or ""
        return {"path": str(path).strip(), "what": str(value.get("what") or value.get("description") or "")}
    return {"path": _item_text(value), "what": ""}


def files_touched(files: Any, facts: dict[str, Any]) -> Any:
    """The summarizer's ``files_modified`` that an editing tool of the session did modify, each under
    the path that tool used (a model may shorten ``/repo/src/a.py`` to ``src/a.py``; a path that could
    be two of them is dropped): a summary may not list a file the session only read or mentioned."""
    if not isinstance(files, list):
        return files  # not a list: validate_fields says what is wrong with it
    modified = [str(f["path"]) for f in facts.get("files_modified") or [] if isinstance(f, dict) and f.get("path")]
    out = []
    for value in files:
        entry = _file(value)
        path = entry["path"]
        same = [m for m in modified if m == path] or [m for m in modified if m.endswith("/" + path.lstrip("./"))]
        if len(set(same)) == 1 and path:
            out.append({**entry, "path": same[0]})
    return out


def merge_checkpoint(
    previous: dict[str, Any] | None,
    fields: dict[str, Any],
    *,
    messages_compacted: int,
    oldest: str | None,
    newest: str | None,
    compacted_at: str,
    facts: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The new checkpoint: the summarizer's fields (already merged with ``previous``'s content), the
    facts, and the bookkeeping — version + 1, what this compaction covered, running totals."""
    previous = previous or {}
    stats = previous.get("stats") or {}
    return {
        **validate_fields(fields),
        "facts": facts if facts is not None else previous.get("facts"),
        "version": int(previous.get("version") or 0) + 1,
        "lossy": True,
        "compaction_info": {
            "messages_compacted": messages_compacted,
            "oldest_message_at": oldest,
            "newest_message_at": newest,
            "compacted_at": compacted_at,
        },
        "stats": {
            "total_compactions": int(stats.get("total_compactions") or 0) + 1,
            "total_messages": int(stats.get("total_messages") or 0) + messages_compacted,
        },
    }


def render_summary_text(checkpoint: dict[str, Any]) -> str:
    """The checkpoint as the text a model reads inside ``<context_summary>``: compact, labelled,
    and plain about being a lossy summary."""
    info = checkpoint.get("compaction_info") or {}
    stats = checkpoint.get("stats") or {}
    total = stats.get("total_messages") or info.get("messages_compacted")
    lines = [
        f"Summary of {total or 'the'} earlier messages (lossy: details were dropped; ask the user, re-read "
        "files, or recall a message by m<seq> with ctxweb's recall tool when something is missing)."
    ]
    if checkpoint.get("objective"):
        lines.append(f"Objective: {checkpoint['objective']}")
    if checkpoint.get("narrative"):
        lines += ["Summary:", checkpoint["narrative"]]

    def section(title: str, items: list[str]) -> None:
        if items:
            lines.append(f"{title}:")
            lines.extend(f"- {item}" for item in items)

    section("Completed", checkpoint.get("completed") or [])
    section("In progress", checkpoint.get("in_progress") or [])
    section("Next steps", checkpoint.get("pending") or [])
    section("Blockers", checkpoint.get("blockers") or [])
    section(
        "Decisions",
        [
            f"{d['decision']}" + (f" (why: {d['rationale']})" if d.get("rationale") else "")
            for d in checkpoint_decisions(checkpoint)
        ],
    )
    section(
        "Files modified",
        [f"{f['path']}" + (f": {f['what']}" if f.get("what") else "") for f in checkpoint.get("files_modified") or []],
    )
    section("Details kept verbatim", checkpoint.get("important_details") or [])
    facts = checkpoint.get("facts")
    # The facts' decisions are under "Decisions" above, beside the summarizer's: each said once.
    rest = {**facts, "decisions": []} if isinstance(facts, dict) else None
    if has_facts(rest):
        lines += ["Recorded from the session, verbatim:", render_facts(rest)]  # type: ignore[arg-type]
    request = checkpoint.get("last_user_request")
    if request and not (has_facts(facts) and _quoted(request, facts)):  # type: ignore[arg-type]
        lines.append(f"Last user request: {request}")
    cuts = [str(cut) for cut in checkpoint.get("cuts") or [] if cut]
    if cuts:
        lines.append("Left out to fit the context window: " + "; ".join(cuts) + ".")
    return "\n".join(lines)


def _quoted(text: str, facts: dict[str, Any]) -> bool:
    """Whether the facts already quote ``text`` (the latest request, say), so it need not be repeated."""
    prose = [p.get("text") for p in facts.get("recent_prose") or [] if isinstance(p, dict)]
    quoted = [facts.get("first_request") or "", *(facts.get("user_messages") or []), *prose]
    return any(text.strip() == str(q).strip() for q in quoted if q)


def checkpoint_decisions(checkpoint: dict[str, Any]) -> list[dict[str, str]]:
    """The decisions a checkpoint records: the summarizer's, then those the facts read under an explicit
    marker (``## Decision:``, ``ADR-n``) that the summarizer did not state already, each once. A
    summarizer's decision without a rationale takes the one the session wrote beside it."""
    out = [_decision(d) for d in checkpoint.get("decisions") or []]
    out = [d for d in out if d["decision"]]
    facts = checkpoint.get("facts")
    marked = facts.get("decisions") if isinstance(facts, dict) else None
    for raw in marked if isinstance(marked, list) else []:
        entry = _decision(raw)
        if not entry["decision"]:
            continue
        keys = _decision_keys(entry)
        same = next((d for d in out if keys & _decision_keys(d)), None)
        if same is None:
            out.append(entry)
        elif not same["rationale"] and entry["rationale"]:
            same["rationale"] = entry["rationale"]
    return out


def _decision_keys(entry: dict[str, str]) -> set[str]:
    """What two statements of one decision share: its words, alone or with the reason, in any case and
    spacing, without the marker or a closing full stop."""

    def norm(text: str) -> str:
        text = " ".join(text.split()).casefold().removeprefix("## decision:").strip()
        return text.rstrip(" .;")

    keys = {norm(entry["decision"])}
    if entry["rationale"]:
        keys.add(norm(f"{entry['decision']} because {entry['rationale']}"))
    return keys - {""}
