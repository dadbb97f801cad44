"""What the real Messages API checks of extended thinking and context management, for the fake server
(``anthropic_server``), and the thinking edit as the API applies it. Standard library only.

Thinking (``thinking: {"type": "enabled" | "adaptive", …}``):

* A request that continues an assistant turn — its last message is a user message holding
  ``tool_result`` blocks — must send that turn's first assistant message starting with a
  ``thinking`` or ``redacted_thinking`` block. The turn is every message after the last user message
  that holds no tool result: a tool loop is one turn, its later steps may come without a thought.
  The API's message is quoted as it words it ("a final `assistant` message must start with a
  thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks)").
* A thinking block comes back as it was sent: its signature must be the fake's signature of its
  text (``signature_for``; the real one is opaque and checked the same way).
* An assistant message does not end with a thinking block.
* Without thinking, a final assistant message (a prefill) holds no thinking block.

Context management (``context_management: {"edits": [...]}``): each edit an object with a known
``type``; ``clear_thinking_20251015`` only with thinking on, first in the list, its ``keep`` either
``"all"`` or ``{"type": "thinking_turns", "value": N ≥ 1}``. The thinking edit (or, with thinking on
and no such edit, the API's default: the last turn's thinking only) removes the thinking blocks of
older assistant turns before the model reads the request (``clear_thinking``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

EDIT_TYPES = ("clear_tool_uses_20250919", "clear_thinking_20251015", "compact_20260112")
THOUGHTS = ("thinking", "redacted_thinking")
_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"


class RuleBroken(Exception):
    """A request the real API refuses (400 ``invalid_request_error``) with this message."""


def signature_for(thought: str) -> str:
    """The signature the fake's models give a thought (``scripted_model.thinking``)."""
    return hashlib.sha256(thought.encode()).hexdigest()


def thinking_on(body: Mapping[str, Any]) -> bool:
    config = body.get("thinking")
    return isinstance(config, dict) and config.get("type") in ("enabled", "adaptive")


def _blocks(message: Any) -> list[Any]:
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, list) else []


def _holds_results(message: Any) -> bool:
    return message.get("role") == "user" and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in _blocks(message)
    )


def turn_starts(messages: list[Any]) -> list[int]:
    """Where each turn begins: every user message that holds no tool result (a person's, or text)."""
    return [
        i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user" and not _holds_results(m)
    ]


def open_turn_start(messages: list[Any]) -> int | None:
    """The index after which the assistant turn the request continues begins, or None when the request
    does not continue one (its last message is not tool results)."""
    if not messages or not isinstance(messages[-1], dict) or not _holds_results(messages[-1]):
        return None
    starts = turn_starts(messages)
    return starts[-1] + 1 if starts else 0


def check_thinking(body: Mapping[str, Any]) -> None:
    """Raises ``RuleBroken`` for what the API refuses of thinking blocks (see the module's doc)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return
    on = thinking_on(body)
    last = messages[-1] if messages else None
    final_thoughts = (
        isinstance(last, dict)
        and last.get("role") == "assistant"
        and any(isinstance(b, dict) and b.get("type") in THOUGHTS for b in _blocks(last))
    )
    if not on and final_thoughts:
        raise RuleBroken(
            f"messages.{len(messages) - 1}.content: When thinking is disabled, an `assistant` message in the "
            "final position cannot contain `thinking`. To use thinking blocks, enable `thinking` in your request."
        )
    if not on:
        return
    for i, message in enumerate(messages):
        blocks = _blocks(message) if isinstance(message, dict) and message.get("role") == "assistant" else []
        for j, block in enumerate(blocks):
            if isinstance(block, dict) and block.get("type") == "thinking":
                thought = block.get("thinking")
                if not isinstance(thought, str) or block.get("signature") != signature_for(thought):
                    raise RuleBroken(f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block")
        if blocks and isinstance(blocks[-1], dict) and blocks[-1].get("type") == "thinking":
            raise RuleBroken(f"messages.{i}: The final block in an assistant message cannot be `thinking`.")
    start = open_turn_start(messages)
    steps = [i for i in range(start or 0, len(messages)) if messages[i].get("role") == "assistant"]
    if start is None or not steps:
        return
    first = steps[0]
    content = messages[first].get("content")
    kind = "text" if isinstance(content, str) else str((_blocks(messages[first]) or [{}])[0].get("type"))
    if kind not in THOUGHTS:
        raise RuleBroken(
            f"messages.{first}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{kind}`. "
            "When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding "
            "the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks "
            f"from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation "
            f"at {_DOCS}"
        )


def edits_of(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The request's context-management edits, checked as the API checks them (``RuleBroken``)."""
    if "context_management" not in body:
        return []
    management = body["context_management"]
    edits = management.get("edits") if isinstance(management, dict) else None
    if not isinstance(edits, list):
        raise RuleBroken("context_management.edits: Input should be a valid list")
    for i, edit in enumerate(edits):
        kind = edit.get("type") if isinstance(edit, dict) else None
        if kind not in EDIT_TYPES:
            raise RuleBroken(
                f"context_management.edits.{i}: Input tag {kind!r} found using 'type' does not match any of the "
                f"expected tags: {', '.join(repr(t) for t in EDIT_TYPES)}"
            )
        if kind == "clear_thinking_20251015":
            if not thinking_on(body):
                raise RuleBroken(
                    f"context_management.edits.{i}: `clear_thinking_20251015` strategy requires `thinking` "
                    "to be enabled"
                )
            if i != 0:
                raise RuleBroken(
                    f"context_management.edits.{i}: `clear_thinking_20251015` must be the first strategy in `edits`"
                )
            _kept_turns(edit, i)
    return edits


def _kept_turns(edit: Mapping[str, Any], index: int) -> int | None:
    """How many of the newest thinking turns the edit keeps; None: all."""
    keep = edit.get("keep", {"type": "thinking_turns", "value": 1})
    if keep == "all":
        return None
    value = keep.get("value") if isinstance(keep, dict) and keep.get("type") == "thinking_turns" else None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise RuleBroken(
            f"context_management.edits.{index}.keep: Input should be 'all' or "
            "{'type': 'thinking_turns', 'value': N} with N >= 1"
        )
    return value


def clear_thinking(body: Mapping[str, Any], edits: list[dict[str, Any]]) -> tuple[Any, dict[str, Any] | None]:
    """The request as the model reads it once the thinking of older turns is cleared, and the applied
    edit (None when nothing was cleared or no edit asked: the API's default reports none)."""
    messages = body.get("messages")
    if not thinking_on(body) or not isinstance(messages, list):
        return body, None
    edit = next((e for e in edits if e.get("type") == "clear_thinking_20251015"), None)
    keep = _kept_turns(edit, 0) if edit is not None else 1
    if keep is None:
        return body, None
    starts = turn_starts(messages)
    turns = [
        [i for i in range(start, end) if messages[i].get("role") == "assistant"]
        for start, end in zip([0, *(s + 1 for s in starts)], [*starts, len(messages)], strict=True)
    ]
    thinking_turns = [t for t in turns if any(b.get("type") in THOUGHTS for i in t for b in _blocks(messages[i]))]
    clearing = {i for t in thinking_turns[: max(0, len(thinking_turns) - keep)] for i in t}
    if not clearing:
        return body, None
    seen = {
        **body,
        "messages": [
            {**m, "content": [b for b in m["content"] if b.get("type") not in THOUGHTS]} if i in clearing else m
            for i, m in enumerate(messages)
        ],
    }
    cleared = len(thinking_turns) - keep
    return seen, ({"type": edit["type"], "cleared_thinking_turns": cleared} if edit is not None else None)
