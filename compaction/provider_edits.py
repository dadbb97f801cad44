"""What a provider's context editing made of the history its model read, so a recorded session holds
the context the model had. Anthropic's ``clear_tool_uses`` edit replaces the oldest tool results (of
tools the request did not exclude) by a placeholder, and their calls' inputs too when asked; the
answer says how many it cleared (``context_management.applied_edits``), not which: the oldest that
many, in the order the results came, as the edit clears them."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from .reversible import MARK

CLEARED_RESULT = f"{MARK} tool result cleared by the provider (context editing); revert restores]"
CLEARED_INPUT_KEY = f"{MARK} input cleared by the provider (context editing); revert restores]"


def tool_uses_cleared(
    messages: Sequence[tuple[int, Any]], *, count: int, excluded: Collection[str] = (), inputs_too: bool = False
) -> dict[int, list[Any]]:
    """The new content of each message (by seq) that the edit changed: ``messages`` are the history's
    (seq, content) in order, up to the reply; ``count`` the tool uses the provider cleared. A result
    cleared before (by ctxweb or an earlier edit) counts among the oldest and stays as it is."""
    names = {
        block.get("id"): block.get("name")
        for _, content in messages
        for block in _blocks(content)
        if block.get("type") == "tool_use"
    }
    ids = [
        block.get("tool_use_id")
        for _, content in messages
        for block in _blocks(content)
        if block.get("type") == "tool_result" and names.get(block.get("tool_use_id")) not in excluded
    ]
    clearing = set(ids[: max(0, count)])
    changed: dict[int, list[Any]] = {}
    for seq, content in messages:
        if not isinstance(content, list):
            continue
        new = [_cleared(block, clearing, inputs_too) for block in content]
        if new != content:
            changed[seq] = new
    return changed


def _blocks(content: Any) -> list[dict[str, Any]]:
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _cleared(block: Any, clearing: set[Any], inputs_too: bool) -> Any:
    if not isinstance(block, dict):
        return block
    if block.get("type") == "tool_result" and block.get("tool_use_id") in clearing and not _is_cleared(block):
        return {**block, "content": CLEARED_RESULT}
    if inputs_too and block.get("type") == "tool_use" and block.get("id") in clearing:
        given = block.get("input")
        if isinstance(given, dict) and given and CLEARED_INPUT_KEY not in given:
            return {**block, "input": {CLEARED_INPUT_KEY: True}}
    return block


def _is_cleared(block: dict[str, Any]) -> bool:
    content = block.get("content")
    if isinstance(content, list) and len(content) == 1 and isinstance(content[0], dict):
        content = content[0].get("text")
    return isinstance(content, str) and content.startswith(MARK)
