"""What the lines of a Claude Code transcript say, one at a time: a user line's message, a response
reassembled from its lines (``Response``), a compact boundary's facts, and an ``api-request-blob``
(the newest user message of a request, as it was sent) with the message it makes of the user lines
it stands for.

``ClaudeCodeReader`` (``claude_code``) decides which lines go together and in what order.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .base import Block, Message, content_block, content_of, make_message, nonempty_str

BLOB = "api-request-blob"
REQUEST = "api-request"
_USER_FLAGS = (
    ("isMeta", "is_meta"),
    ("isCompactSummary", "is_compact_summary"),
    ("isVisibleInTranscriptOnly", "visible_in_transcript_only"),
)


def user_line_message(event: dict[str, Any], created_at: str | None) -> Message:
    metadata = line_facts(event)
    for flag, name in _USER_FLAGS:
        if event.get(flag) is True:
            metadata[name] = True
    content = content_of(event["message"].get("content"))
    return make_message(
        "user", content, client_id=nonempty_str(event.get("uuid")), created_at=created_at, metadata=metadata
    )


@dataclass
class Response:
    """An assistant response being reassembled from its lines (they share ``message.id``)."""

    message_id: str | None
    first: dict[str, Any]
    created_at: str | None = None  # the first line's (see ClaudeCodeReader._timestamp)
    blocks: list[Block] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    request_id: str | None = None
    model: str | None = None
    stop_reason: str | None = None
    is_api_error: bool = False

    def add(self, event: dict[str, Any]) -> None:
        body = event["message"]
        content = content_of(body.get("content"))
        if isinstance(content, str):
            content = [content_block(content)] if content else []
        self.blocks.extend(content)
        if isinstance(body.get("usage"), dict):
            self.usage = body["usage"]
        self.request_id = self.request_id or nonempty_str(event.get("requestId"))
        self.model = nonempty_str(body.get("model")) or self.model
        self.stop_reason = nonempty_str(body.get("stop_reason")) or self.stop_reason
        self.is_api_error = self.is_api_error or event.get("isApiErrorMessage") is True

    def message(self) -> Message:
        metadata = line_facts(self.first)
        for name, value in (("model", self.model), ("request_id", self.request_id), ("stop_reason", self.stop_reason)):
            if value is not None:
                metadata[name] = value
        if self.is_api_error:
            metadata["is_api_error"] = True
        if usage := usage_of(self.usage):
            metadata["usage"] = usage
        return make_message(
            "assistant",
            self.blocks,
            client_id=self.message_id or nonempty_str(self.first.get("uuid")),
            created_at=self.created_at,
            metadata=metadata,
        )


@dataclass(frozen=True)
class RequestBlob:
    """A message Claude Code sent with one API request, written just before the request: the newest
    user message; after it compacted its context, each message the request starts from."""

    hash: str | None
    content: str | list[Block]
    role: str = "user"


def request_blob(event: dict[str, Any]) -> RequestBlob | None:
    """An ``api-request-blob`` line's message, or None when it holds none that could be stored."""
    message = event.get("message")
    role = message.get("role", "user") if isinstance(message, dict) else None
    if not isinstance(message, dict) or role not in ("user", "assistant"):
        return None
    content = content_of(message.get("content"))
    if not content:
        return None
    return RequestBlob(nonempty_str(event.get("hash")), content, role)


def blob_message(blob: RequestBlob, created_at: str | None) -> Message:
    """A blob that follows another of the same request, as a message of its own (named by its hash)."""
    client_id = f"blob-{blob.hash}"[:200] if blob.hash else None
    metadata = {"blob": blob.hash[:100]} if blob.hash else {}
    return make_message(blob.role, blob.content, client_id=client_id, created_at=created_at, metadata=metadata)


def lines_as_sent(contents: Sequence[Any]) -> list[Any]:
    """User lines' content, as written, taken together as one message's blocks (a string is a text block)."""
    blocks: list[Any] = []
    for content in contents:
        if isinstance(content, str):
            blocks.append({"type": "text", "text": content})
        elif isinstance(content, list):
            blocks += content
        else:
            blocks.append(content)
    return blocks


def sent_hash(role: str, content: list[Any]) -> str:
    """The hash Claude Code names a message by in ``api-request`` lines (and a blob by): SHA-256 of its
    JSON with sorted keys, no spaces, unescaped Unicode, without ``cache_control``."""
    text = json.dumps(
        _without_cache_control({"content": content, "role": role}),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


def _without_cache_control(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_cache_control(v) for v in value]
    return value


def tool_result_ids(content: str | list[Block]) -> list[str]:
    if isinstance(content, str):
        return []
    return [b["tool_use_id"] for b in content if b["type"] == "tool_result"]


def answers_the_same_calls(lines: Sequence[Message], blob: RequestBlob) -> bool:
    """There are lines, and the blob answers exactly the tool calls they answer: it is the request
    those lines went into."""
    if not lines:
        return False
    from_lines = [i for m in lines for i in tool_result_ids(m["content"])]
    return sorted(from_lines) == sorted(tool_result_ids(blob.content))


def merged_user_message(lines: Sequence[Message], blob: RequestBlob) -> Message:
    """One user message with the blob's content standing for ``lines`` (the user lines of that request).

    It is named after the first line (client id, uuid, parent, time); it is Claude Code's compaction
    summary when any line was, and ``is_meta`` only when every line was (a person's prompt among
    them is the user's words)."""
    first = lines[0]
    metadata = {k: first["metadata"][k] for k in ("uuid", "parent_uuid") if k in first["metadata"]}
    if any(m["metadata"].get("is_compact_summary") for m in lines):
        metadata["is_compact_summary"] = True
    for flag in ("is_meta", "visible_in_transcript_only"):
        if all(m["metadata"].get(flag) for m in lines):
            metadata[flag] = True
    if blob.hash is not None:
        metadata["blob"] = blob.hash[:100]
    metadata["lines"] = len(lines)
    return make_message(
        "user", blob.content, client_id=first["client_id"], created_at=first["created_at"], metadata=metadata
    )


def line_facts(event: dict[str, Any]) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    for source, name in (("uuid", "uuid"), ("parentUuid", "parent_uuid")):
        value = nonempty_str(event.get(source))
        if value is not None:
            facts[name] = value
    return facts


def boundary_facts(event: dict[str, Any]) -> dict[str, Any]:
    """What a compact boundary says of itself: Claude Code's trigger (auto / manual) and its own count
    of the context before (``compactMetadata``); only the values of the expected kinds."""
    meta = event.get("compactMetadata")
    if not isinstance(meta, dict):
        return {}
    facts: dict[str, Any] = {}
    if (trigger := nonempty_str(meta.get("trigger"))) is not None:
        facts["trigger"] = trigger[:50]
    if isinstance(pre := meta.get("preTokens"), int) and not isinstance(pre, bool) and pre >= 0:
        facts["pre_tokens"] = pre
    return facts


def usage_of(raw: dict[str, Any] | None) -> dict[str, int]:
    if not isinstance(raw, dict):
        return {}
    return {
        k: v
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
        if isinstance(v := raw.get(k), int) and not isinstance(v, bool)
    }
