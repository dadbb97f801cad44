"""The offline summarizer: a checkpoint built from what the messages say, without a model.

Deterministic (the same messages give the same checkpoint) and within the summary budget. It
copies rather than paraphrases: the first request is the objective, the latest one is kept
verbatim, files come from the calls that wrote them, commands and error lines are kept as they
were, decisions are lines a preserve pattern or a deciding phrase marks. What does not fit the
budget goes, oldest first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from .checkpoint import LIST_FIELDS, TEXT_FIELDS, empty_fields, render_summary_text, validate_fields
from .context import summary_message
from .identifiers import PATH_RE
from .reversible import MARK, compile_patterns, is_human_prompt, message_text, result_text
from .tokens import Tokenizer
from .types import Msg

WRITE_TOOLS = {
    "write",
    "edit",
    "multiedit",
    "notebookedit",
    "str_replace_editor",
    "str_replace_based_edit_tool",
    "create_file",
    "write_file",
    "edit_file",
    "apply_patch",
    "replace",
}
READ_COMMANDS = {"view", "read"}  # the text editor tools' commands that change nothing
PATH_KEYS = ("file_path", "path", "notebook_path", "filename", "file")
ITEM_CHARS = 240
REQUEST_CHARS = 1_500
DECIDING_RE = re.compile(r"\b(decided|decision|we will use|we'll use|i'll use|chose|going with|instead of)\b", re.I)
DONE_RE = re.compile(
    r"\b(done|fixed|added|created|updated|implemented|passes|passed|committed|removed|resolved|completed)\b", re.I
)
NEXT_RE = re.compile(r"\b(next|todo|remaining|still need|need to|will now|then i'll|afterwards)\b", re.I)
SENTENCE_RE = re.compile(r"(?<=[.!?])\s+")
# Trimmed first when over budget: the longest lists of the least essential kind.
TRIM_ORDER = ("important_details", "completed", "blockers", "decisions", "files_modified", "in_progress", "pending")


def _cut(text: str, limit: int) -> str:
    """Verbatim (whitespace and line breaks kept) up to ``limit`` characters."""
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _clip(text: str, limit: int = ITEM_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in SENTENCE_RE.split(" ".join(text.split())) if s.strip()]


def _unique(items: Iterable[Any]) -> list[Any]:
    seen: set[str] = set()
    out = []
    for item in items:
        key = repr(item).lower()
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


class ExtractiveSummarizer:
    name = "extractive"

    def __init__(self, tokenizer: Tokenizer, preserve_patterns: Sequence[str] = ()) -> None:
        self.tokenizer = tokenizer
        self.patterns = compile_patterns(preserve_patterns)

    def summarize(
        self,
        messages: Sequence[Msg],
        *,
        previous: dict[str, Any] | None = None,
        budget: int,
        instructions: str = "",
    ) -> dict[str, Any]:
        prev = validate_fields(previous) if previous and previous.get("objective") else empty_fields()
        prompts = [message_text(m.content).strip() for m in messages if is_human_prompt(m)]
        prompts = [p for p in prompts if p and not p.startswith(MARK)]
        texts = [message_text(m.content) for m in messages if m.role == "assistant"]
        texts = [t for t in texts if t.strip()]
        calls = [b for m in messages if isinstance(m.content, list) for b in m.content if b.get("type") == "tool_use"]
        results = [
            b for m in messages if isinstance(m.content, list) for b in m.content if b.get("type") == "tool_result"
        ]

        objective = prev["objective"] or (_clip(prompts[0], 400) if prompts else "")
        if not objective:
            objective = _clip(texts[0], 400) if texts else "Continue the session's work."
        last_request = _cut(prompts[-1], REQUEST_CHARS) if prompts else prev["last_user_request"]

        files = {f["path"]: f for f in prev["files_modified"]}
        for call in calls:
            name = str(call.get("name", "")).lower()
            args = call.get("input") or {}
            path = next((args[k] for k in PATH_KEYS if isinstance(args.get(k), str)), None)
            if name in WRITE_TOOLS and path and args.get("command") not in READ_COMMANDS:
                action = args.get("command") if isinstance(args.get("command"), str) else call.get("name")
                files.pop(path, None)  # re-insert: most recently modified last
                files[path] = {"path": path, "what": f"{action}"}

        commands = [
            "$ " + _clip(str(call["input"]["command"]).splitlines()[0] if call["input"]["command"] else "", 200)
            for call in calls
            if isinstance(call.get("input"), dict)
            and isinstance(call["input"].get("command"), str)
            and str(call.get("name", "")).lower() not in WRITE_TOOLS
        ]
        error_lines: list[str] = []
        for block in results:
            lines = [line for line in result_text(block.get("content")).splitlines() if line.strip()]
            hits = [line for line in lines if self._preserved(line) and not line.startswith(MARK)]
            if block.get("is_error") and lines and not hits:
                hits = lines[:1]
            error_lines.extend(_cut(line, ITEM_CHARS) for line in hits)
        decisions = self._decisions(messages)
        paths = [p for t in [*prompts, *texts] for p in PATH_RE.findall(t)]

        completed = [_clip(s) for t in texts for s in _sentences(t)[:2] if DONE_RE.search(s)]
        pending = [_clip(s) for t in texts[-3:] for s in _sentences(t) if NEXT_RE.search(s)]
        answered = bool(messages) and messages[-1].role == "assistant" and bool(texts)
        if prompts and not answered:
            pending.append(_clip(f"Answer the latest request: {prompts[-1]}"))
        in_progress = [_clip(_sentences(texts[-1])[0])] if texts else []
        if instructions.strip():
            pending.insert(0, _clip(f"Focus (from the user): {instructions.strip()}"))

        fields = {
            "objective": objective,
            "completed": _unique([*prev["completed"], *completed]),
            "in_progress": _unique(in_progress),
            "pending": _unique(pending or prev["pending"]),
            "blockers": _unique([*prev["blockers"], *error_lines[-5:]]),
            "decisions": _unique([*prev["decisions"], *decisions]),
            "files_modified": list(files.values()),
            "important_details": _unique([*prev["important_details"], *paths, *commands, *error_lines]),
            "last_user_request": last_request,
        }
        return fit_to_budget(validate_fields(fields), self.tokenizer, budget)

    def _preserved(self, line: str) -> bool:
        return any(p.search(line) for p in self.patterns)

    def _decisions(self, messages: Sequence[Msg]) -> list[dict[str, str]]:
        found = []
        for m in messages:
            if m.role not in ("assistant", "user"):
                continue
            for line in message_text(m.content).splitlines():
                stripped = line.strip()
                if not stripped or stripped.startswith(MARK):
                    continue
                marked = stripped.startswith("## Decision:") or re.match(r"^ADR-\d+", stripped)
                if marked or (m.role == "assistant" and DECIDING_RE.search(stripped)):
                    decision, _, why = stripped.partition(" because ")
                    found.append({"decision": _clip(decision), "rationale": _clip(why)})
        return found


def fit_to_budget(checkpoint: dict[str, Any], tokenizer: Tokenizer, budget: int) -> dict[str, Any]:
    """Drop the oldest items of the longest, least essential lists until the rendered summary fits;
    then shorten the texts. Keys other than the checkpoint fields pass through untouched."""
    out: dict[str, Any] = {k: (list(v) if isinstance(v, list) else v) for k, v in checkpoint.items()}

    def size() -> int:
        return tokenizer.count_message("user", summary_message(render_summary_text(out))["content"])

    current = size()
    while current > budget:
        candidates = [f for f in TRIM_ORDER if out.get(f)]
        if not candidates:
            break
        longest = max(candidates, key=lambda f: (len(out[f]), -TRIM_ORDER.index(f)))
        # Drop several at once when far over, so a long list costs few recounts.
        drop = max(1, min(len(out[longest]) // 2, (current - budget) // 40))
        del out[longest][:drop]
        current = size()
    for name in TEXT_FIELDS:
        limit = 600
        while current > budget and len(out.get(name) or "") > 40:
            out[name] = _cut(out[name], limit)
            limit //= 2
            current = size()
    return out


__all__ = ["LIST_FIELDS", "ExtractiveSummarizer", "fit_to_budget"]
