"""The model-ready request built from stored messages: always a valid Anthropic (or OpenAI) request.

Rules enforced for Anthropic: roles alternate user/assistant (neighbours of one role are merged),
the first message is from the user, a ``tool_result`` sits in the user message right after the
assistant message holding its ``tool_use`` (and before any text there), and no ``tool_use`` is left
without its result except in the final assistant message. Anything that can't satisfy those
(an orphaned result, an unanswered call in the middle) is kept as plain text, never dropped.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

SUMMARY_OPEN = "<context_summary>"
SUMMARY_CLOSE = "</context_summary>"


def summary_message(summary_text: str) -> dict[str, Any]:
    return {"role": "user", "content": f"{SUMMARY_OPEN}\n{summary_text}\n{SUMMARY_CLOSE}"}


def _blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [dict(b) for b in content]


def _as_text(block: dict[str, Any]) -> dict[str, Any]:
    if block.get("type") == "tool_use":
        args = json.dumps(block.get("input", {}), ensure_ascii=False)
        return {"type": "text", "text": f"[tool call {block.get('name')} ({block.get('id')}): {args}]"}
    if block.get("type") == "tool_result":
        inner = _result_text(block.get("content", ""))
        return {"type": "text", "text": f"[tool result for {block.get('tool_use_id')}]\n{inner}"}
    return block


def _result_text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(t for p in content if isinstance(p, dict) and (t := block_as_text(p)) is not None)
    return content if isinstance(content, str) else ""


def block_as_text(block: dict[str, Any]) -> str | None:
    """What a block says, as text, for a reader with no such block (an OpenAI request, a result made
    text); None for reasoning, which was signed for its own provider and is left out."""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind in ("tool_use", "tool_result"):
        return str(_as_text(block)["text"])
    if kind in ("thinking", "redacted_thinking"):
        return None
    source = _source(block)
    if kind == "document" and source.get("type") == "text":
        return str(source.get("data", ""))
    if kind in ("image", "document"):
        return f"[{kind}]"
    # A server tool's block, Claude Code's tool_reference, a type not known yet: its JSON says it.
    return f"[{kind}] {json.dumps(block, ensure_ascii=False)}"


def to_anthropic_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stored messages (roles user/assistant/tool/system, in order) → a valid ``messages`` list."""
    turns: list[dict[str, Any]] = []
    for msg in messages:
        role = msg["role"]
        blocks = _blocks(msg.get("content", ""))
        if role == "system":
            text = "\n".join(t for b in blocks if (t := block_as_text(b)) is not None)
            blocks = [{"type": "text", "text": f"<system>\n{text}\n</system>"}]
        api_role = "assistant" if role == "assistant" else "user"
        # Calls belong to the assistant and results to the user; anything else is kept as text.
        misplaced = "tool_result" if api_role == "assistant" else "tool_use"
        blocks = [_as_text(b) if b.get("type") == misplaced else b for b in blocks]
        if turns and turns[-1]["role"] == api_role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": api_role, "content": blocks})

    if turns and turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": [{"type": "text", "text": "(conversation continues)"}]})

    for i, turn in enumerate(turns):
        if turn["role"] == "assistant":
            _pair(turn, turns[i + 1] if i + 1 < len(turns) else None)
        elif i == 0:
            turn["content"] = [_as_text(b) if b.get("type") == "tool_result" else b for b in turn["content"]]

    for turn in turns:
        if not turn["content"]:
            turn["content"] = [{"type": "text", "text": "(empty)"}]
        for b in turn["content"]:
            if b.get("type") == "text" and not b.get("text"):
                b["text"] = "(empty)"
    return turns


def _pair(assistant: dict[str, Any], reply: dict[str, Any] | None) -> None:
    """Keep each call whose result is in the next user turn (results first there); the rest become text.
    A final assistant turn keeps its calls: the client is about to answer them."""
    calls: list[str] = []
    content = []
    for b in assistant["content"]:
        if b.get("type") == "tool_use" and b["id"] in calls:
            b = _as_text(b)  # the same id twice in one turn can't be answered unambiguously
        elif b.get("type") == "tool_use":
            calls.append(b["id"])
        content.append(b)
    if reply is None:
        assistant["content"] = content
        return
    answered: set[str] = set()
    results, rest = [], []
    for b in reply["content"]:
        if b.get("type") == "tool_result" and b.get("tool_use_id") in calls and b["tool_use_id"] not in answered:
            answered.add(b["tool_use_id"])
            results.append(b)
        else:
            rest.append(_as_text(b) if b.get("type") == "tool_result" else b)
    assistant["content"] = [
        _as_text(b) if b.get("type") == "tool_use" and b["id"] not in answered else b for b in content
    ]
    reply["content"] = results + rest


THOUGHTS = ("thinking", "redacted_thinking")


def thinking_enabled(request: dict[str, Any]) -> bool:
    """Whether a request turns extended thinking on (``thinking.type`` enabled or adaptive)."""
    config = request.get("thinking")
    return isinstance(config, dict) and config.get("type") in ("enabled", "adaptive")


def thinking_turn_kept(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``turns`` (a valid ``messages`` list) valid with extended thinking on too. A request whose last
    message holds tool results continues an assistant turn (every message after the last user message
    without a tool result), and that turn's first assistant message must start with a thought. When a
    compaction left the turn starting elsewhere, the steps before its newest assistant message that
    starts with a thought become text (calls and results alike), so the turn starts there, its thought
    as it came; with no such message the whole turn becomes text and the request starts a new one.
    Thoughts themselves are never changed: they are signed."""
    if not turns or not _holds_results(turns[-1]):
        return turns
    starts = [i for i, t in enumerate(turns) if t["role"] == "user" and not _holds_results(t)]
    start = starts[-1] + 1 if starts else 0
    steps = [i for i in range(start, len(turns)) if turns[i]["role"] == "assistant"]
    if not steps or _starts_with_thought(turns[steps[0]]):
        return turns
    end = next((i for i in reversed(steps) if _starts_with_thought(turns[i])), len(turns))
    return [
        {**t, "content": [_as_text(b) if b.get("type") in ("tool_use", "tool_result") else b for b in t["content"]]}
        if start <= i < end
        else t
        for i, t in enumerate(turns)
    ]


def _holds_results(turn: dict[str, Any]) -> bool:
    return turn["role"] == "user" and any(b.get("type") == "tool_result" for b in _blocks(turn["content"]))


def _starts_with_thought(turn: dict[str, Any]) -> bool:
    blocks = _blocks(turn["content"])
    return bool(blocks) and blocks[0].get("type") in THOUGHTS


def to_openai_messages(messages: Sequence[dict[str, Any]], *, system: str | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for msg in messages:
        role = msg["role"]
        blocks = _blocks(msg.get("content", ""))
        texts = [t for b in blocks if b.get("type") != "tool_use" and (t := block_as_text(b)) is not None]
        if role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) or None}
            calls = [
                {
                    "id": b["id"],
                    "type": "function",
                    "function": {"name": b["name"], "arguments": json.dumps(b.get("input", {}), ensure_ascii=False)},
                }
                for b in blocks
                if b.get("type") == "tool_use"
            ]
            if calls:
                entry["tool_calls"] = calls
            out.append(entry)
            continue
        for b in blocks:
            if b.get("type") == "tool_result":
                inner = _result_text(b.get("content", ""))
                out.append({"role": "tool", "tool_call_id": b["tool_use_id"], "content": inner})
        parts: list[dict[str, Any]] = []
        for b in blocks:
            if b.get("type") == "image":
                src = b.get("source", {})
                url = src.get("url") or f"data:{src.get('media_type', 'image/png')};base64,{src.get('data', '')}"
                parts.append({"type": "image_url", "image_url": {"url": url}})
            elif b.get("type") != "tool_result" and (text := block_as_text(b)) is not None:
                parts.append({"type": "text", "text": text})
        if role == "tool" and not parts:
            continue
        if parts or not any(b.get("type") == "tool_result" for b in blocks):
            simple = all(p["type"] == "text" for p in parts)
            content: Any = "\n".join(p["text"] for p in parts) if simple else parts
            out.append({"role": "system" if role == "system" else "user", "content": content})
    return out


def openai_tools(tools: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": t.get("name"),
                "description": t.get("description", ""),
                "parameters": t.get("input_schema", t.get("parameters", {"type": "object", "properties": {}})),
            },
        }
        for t in tools
    ]


def _source(block: dict[str, Any]) -> dict[str, Any]:
    source = block.get("source")
    return source if isinstance(source, dict) else {}
