"""Anthropic transcripts: a Messages API request (``{model?, system?, tools?, messages}``) or a list
(or JSONL) of them, one conversation each."""

from __future__ import annotations

from collections import Counter
from typing import Any

from .base import (
    Conversation,
    Transcript,
    TranscriptError,
    UniqueToolIds,
    content_of,
    json_kind,
    make_message,
    nonempty_str,
    read_json,
)

FORMAT = "anthropic"


def read(text: str) -> Transcript:
    return read_json(text, FORMAT, _conversations)


def _conversations(value: Any, skipped: Counter[str]) -> list[Conversation]:
    expected = "Expected a Messages API request {model?, system?, tools?, messages: [...]} or a list of them."
    if isinstance(value, dict):
        if not isinstance(value.get("messages"), list):
            keys = ", ".join(sorted(map(str, value))[:8]) or "none"
            raise TranscriptError(
                f"This is not an Anthropic request: an object without a 'messages' list (keys: {keys}). {expected}"
            )
        return [_anthropic_request(value, "main", skipped)]
    if not isinstance(value, list):
        raise TranscriptError(f"This is not an Anthropic request: the JSON is {json_kind(value)}. {expected}")
    requests = [item for item in value if isinstance(item, dict) and isinstance(item.get("messages"), list)]
    if value and not requests:
        raise TranscriptError(
            f"This is not an Anthropic request: a list, but no item has a 'messages' list. {expected}"
        )
    skipped["not_a_request"] += len(value) - len(requests)
    return [_anthropic_request(req, f"request-{k}", skipped) for k, req in enumerate(requests)]


def _anthropic_request(req: dict[str, Any], key: str, skipped: Counter[str]) -> Conversation:
    system = req.get("system")
    if isinstance(system, list):
        system = "\n\n".join(
            b["text"] if isinstance(b, dict) and isinstance(b.get("text"), str) else (b if isinstance(b, str) else "")
            for b in system
        )
    raw_tools = listed if isinstance(listed := req.get("tools"), list) else []
    tools = [dict(t) for t in raw_tools if isinstance(t, dict)]
    conv = Conversation(
        key=key,
        model=nonempty_str(req.get("model")),
        tools=tools,
        system_prompt=system if isinstance(system, str) else "",
    )
    ids = UniqueToolIds()
    for raw in req["messages"]:
        if not isinstance(raw, dict) or not nonempty_str(raw.get("role")):
            skipped["not_a_message"] += 1
            continue
        conv.messages.append(ids.apply(make_message(raw["role"], content_of(raw.get("content")))))
    return conv
