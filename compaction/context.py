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
        inner = block.get("content", "")
        if isinstance(inner, list):
            inner = "\n".join(p.get("text", "") for p in inner if isinstance(p, dict) and p.get("type") == "text")
        return {"type": "text", "text": f"[tool result for {block.get('tool_use_id')}]\n{inner}"}
    return block


def to_anthropic_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stored messages (roles user/assistant/tool/system, in order) → a valid ``messages`` list."""
    turns: list[dict[str, Any]] = []
    for msg in messages:
        role = msg["role"]
        blocks = _blocks(msg.get("content", ""))
        if role == "system":
            text = "\n".join(b.get("text", "") for b in blocks if b.get("type") == "text")
            blocks = [{"type": "text", "text": f"<system>\n{text}\n</system>"}]
        api_role = "assistant" if role == "assistant" else "user"
        if turns and turns[-1]["role"] == api_role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": api_role, "content": blocks})

    if turns and turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": [{"type": "text", "text": "(conversation continues)"}]})

    # Pair tool calls and results across each assistant → user boundary.
    for i, turn in enumerate(turns):
        if turn["role"] == "assistant":
            calls = {b["id"] for b in turn["content"] if b.get("type") == "tool_use"}
            nxt = turns[i + 1] if i + 1 < len(turns) else None
            answered = {b.get("tool_use_id") for b in nxt["content"] if b.get("type") == "tool_result"} if nxt else set()
            if nxt is not None:
                turn["content"] = [
                    _as_text(b) if b.get("type") == "tool_use" and b["id"] not in answered else b for b in turn["content"]
                ]
            prev_calls = calls if nxt is not None else set()
            if nxt is not None:
                results = [b for b in nxt["content"] if b.get("type") == "tool_result" and b.get("tool_use_id") in prev_calls]
                seen: set[str] = set()
                kept_results = []
                for b in results:
                    if b["tool_use_id"] in seen:
                        kept_results.append(_as_text(b))
                    else:
                        seen.add(b["tool_use_id"])
                        kept_results.append(b)
                rest = [
                    _as_text(b) if b.get("type") == "tool_result" else b
                    for b in nxt["content"]
                    if not (b.get("type") == "tool_result" and b.get("tool_use_id") in prev_calls)
                ]
                nxt["content"] = [b for b in kept_results if b.get("type") == "tool_result"] + [
                    b for b in kept_results if b.get("type") != "tool_result"
                ] + rest
        elif i == 0 or turns[i - 1]["role"] != "assistant":
            turn["content"] = [_as_text(b) if b.get("type") == "tool_result" else b for b in turn["content"]]

    for turn in turns:
        if not turn["content"]:
            turn["content"] = [{"type": "text", "text": "(empty)"}]
        for b in turn["content"]:
            if b.get("type") == "text" and not b.get("text"):
                b["text"] = "(empty)"
    return turns


def to_openai_messages(
    messages: Sequence[dict[str, Any]], *, system: str | None
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for msg in messages:
        role = msg["role"]
        blocks = _blocks(msg.get("content", ""))
        texts = [b.get("text", "") for b in blocks if b.get("type") == "text"]
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
                inner = b.get("content", "")
                if isinstance(inner, list):
                    inner = "\n".join(p.get("text", "") for p in inner if isinstance(p, dict) and p.get("type") == "text")
                out.append({"role": "tool", "tool_call_id": b["tool_use_id"], "content": inner})
        parts: list[dict[str, Any]] = []
        for b in blocks:
            if b.get("type") == "text":
                parts.append({"type": "text", "text": b["text"]})
            elif b.get("type") == "image":
                src = b.get("source", {})
                url = src.get("url") or f"data:{src.get('media_type', 'image/png')};base64,{src.get('data', '')}"
                parts.append({"type": "image_url", "image_url": {"url": url}})
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
