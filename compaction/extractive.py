"""The offline summarizer: a checkpoint built from what the session's structure says, without a model.

Deterministic (the same messages give the same checkpoint) and within the summary budget. It states
only what it can read, never a guess: the todo list's items by status (completed, in progress,
pending), decisions only under an explicit marker, the latest request verbatim, and the paths the
conversation mentions. Everything else an agent needs to go on (the user's words, the files changed,
the commands and their open errors, the current work) are the checkpoint's ``facts``, which
``plan_summarize`` carries beside any summarizer's fields (``compaction.facts``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from .checkpoint import LIST_FIELDS, empty_fields, render_summary_text, validate_fields
from .context import summary_message
from .facts import facts_update, person_messages
from .identifiers import PATH_RE
from .reversible import MARK, compile_patterns, message_text, result_text
from .room import trim_summary
from .tokens import Tokenizer
from .types import Msg

ITEM_CHARS = 240
REQUEST_CHARS = 1_500
OBJECTIVE_CHARS = 300
MAX_PATHS = 60


def _cut(text: str, limit: int) -> str:
    """Verbatim (whitespace and line breaks kept) up to ``limit`` characters."""
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _clip(text: str, limit: int = ITEM_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _unique(items: Iterable[Any]) -> list[Any]:
    seen: set[str] = set()
    out = []
    for item in items:
        key = repr(item).lower()
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def _said(msg: Msg) -> str:
    """Everything a message says that may name a path: its text, its tool inputs and results."""
    if isinstance(msg.content, str):
        return msg.content
    parts = []
    for block in msg.content:
        if block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            parts.append(json.dumps(block.get("input"), ensure_ascii=False, default=str))
        elif block.get("type") == "tool_result":
            parts.append(result_text(block.get("content")))
    return "\n".join(parts)


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
        facts = facts_update((previous or {}).get("facts"), messages)
        prompts = person_messages(messages)
        first = facts["first_request"] or (prompts[0] if prompts else "")
        objective = prev["objective"] or (_clip(first.splitlines()[0], OBJECTIVE_CHARS) if first.strip() else "")
        if not objective:
            texts = [message_text(m.content).strip() for m in messages if m.role == "assistant"]
            texts = [t for t in texts if t and not t.startswith(MARK)]
            objective = _clip(texts[0], OBJECTIVE_CHARS) if texts else "Continue the session's work."
        todos = facts["todos"]

        def by_status(*statuses: str) -> list[str]:
            return [_clip(t["content"]) for t in todos if str(t.get("status", "")).lower() in statuses]

        pending = by_status("pending", "todo", "not_started")
        if instructions.strip():
            pending.insert(0, _clip(f"Focus (from the user): {instructions.strip()}"))
        named = {f["path"] for f in facts["files_modified"]} | set(facts["files_read"])
        mentioned = [p for m in messages for p in PATH_RE.findall(_said(m)) if p not in named]
        fields = {
            "objective": objective,
            # With a todo list, its items by status; without one, nothing is guessed.
            "completed": by_status("completed", "done") if todos else prev["completed"],
            "in_progress": by_status("in_progress", "in-progress", "active", "doing"),
            "pending": pending if todos or instructions.strip() else prev["pending"],
            "blockers": prev["blockers"],
            "decisions": prev["decisions"],
            "files_modified": [],
            "important_details": _unique([*prev["important_details"], *mentioned])[-MAX_PATHS:],
            "last_user_request": _cut(prompts[-1], REQUEST_CHARS) if prompts else prev["last_user_request"],
            "narrative": prev["narrative"],
        }
        return fit_to_budget(validate_fields(fields), self.tokenizer, budget)


def fit_to_budget(checkpoint: dict[str, Any], tokenizer: Tokenizer, budget: int) -> dict[str, Any]:
    """The summarizer's part cut to ``budget`` (``compaction.room.trim_summary``: the longest, least
    essential lists first, then the texts). Keys other than the checkpoint fields pass through."""
    out: dict[str, Any] = {k: (list(v) if isinstance(v, list) else v) for k, v in checkpoint.items()}

    def size() -> int:  # the summarizer's part: the facts have a budget of their own
        return tokenizer.count_message("user", summary_message(render_summary_text({**out, "facts": None}))["content"])

    trim_summary(out, size(), budget, size, {}, [])
    return out


__all__ = ["LIST_FIELDS", "ExtractiveSummarizer", "fit_to_budget"]
