"""Validation and normalisation of incoming messages (the REST body, an import, a hook upload).

Everything that reaches storage has been through ``normalize_message``: roles are known, content
is a string or a list of blocks, and OpenAI-style ``tool_calls`` / ``tool_call_id``
have become Anthropic-style ``tool_use`` / ``tool_result`` blocks, so the rest of ctxweb speaks one
shape. A NUL character (U+0000, say in the output of ``cat`` on a binary file) becomes U+FFFD: stored
text can't hold it (PostgreSQL's text and jsonb refuse it), and refusing the message would stall an
agent that resends it.

A block is stored as it came whatever its type (any object with a string ``type``): a client's history
holds what its provider sends, the provider's server tool blocks (``server_tool_use``,
``web_search_tool_result``, …), Claude Code's ``tool_reference`` in a tool result, types added after
this was written. Only the types ctxweb reads are checked, for what its readers rely on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from . import jsonvalues
from .types import ROLES

NUL, REPLACEMENT = "\x00", "\ufffd"
CLIENT_ID_MAX = 200
TOOL_ID_MAX = 255  # the ToolUse index's column
# Real UTC offsets run from -12:00 to +14:00; PostgreSQL refuses beyond ±15:59, Python reads up to ±23:59.
MAX_UTC_OFFSET = timedelta(hours=14)
# A moment whose UTC value falls outside these can't be stored and read back as a Python datetime.
EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
LATEST = datetime(9999, 12, 30, tzinfo=UTC)


class MessageError(ValueError):
    """One message is malformed; ``code`` is machine-readable, ``str()`` is for people."""

    def __init__(self, detail: str, *, code: str = "invalid_message", index: int | None = None) -> None:
        self.detail = detail if index is None else f"messages[{index}]: {detail}"
        super().__init__(self.detail)
        self.code = code
        self.index = index


@dataclass
class NormalizedMessage:
    role: str
    content: str | list[dict[str, Any]]
    client_id: str | None = None
    created_at: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def tool_use_ids(self) -> list[str]:
        return tool_use_ids(self.content)

    @property
    def tool_result_ids(self) -> list[str]:
        return tool_result_ids(self.content)


def tool_use_ids(content: str | list[dict[str, Any]]) -> list[str]:
    if isinstance(content, str):
        return []
    return [b["id"] for b in content if b.get("type") == "tool_use"]


def tool_result_ids(content: str | list[dict[str, Any]]) -> list[str]:
    if isinstance(content, str):
        return []
    return [b["tool_use_id"] for b in content if b.get("type") == "tool_result"]


def normalize_batch(payload: Any, *, max_messages: int) -> list[NormalizedMessage]:
    """A body that is one message or a list of them → normalised messages, or ``MessageError``."""
    items = payload if isinstance(payload, list) else [payload]
    if isinstance(payload, dict) and isinstance(payload.get("messages"), list):
        items = payload["messages"]
    if not items:
        raise MessageError("send one message or a non-empty list of messages", code="empty_batch")
    if len(items) > max_messages:
        raise MessageError(
            f"a batch holds at most {max_messages} messages; this one has {len(items)}", code="too_many_messages"
        )
    normalized = [normalize_message(item, index=i if len(items) > 1 else None) for i, item in enumerate(items)]
    seen: set[str] = set()
    for i, msg in enumerate(normalized):
        if msg.client_id is not None:
            if msg.client_id in seen:
                raise MessageError(
                    f"client_id {msg.client_id!r} appears twice in this batch", code="duplicate_client_id", index=i
                )
            seen.add(msg.client_id)
    return normalized


def normalize_message(raw: Any, *, index: int | None = None) -> NormalizedMessage:
    def fail(detail: str, code: str = "invalid_message") -> MessageError:
        return MessageError(detail, code=code, index=index)

    if not isinstance(raw, dict):
        raise fail(f"a message is a JSON object, not {_kind(raw)}")
    unstorable = jsonvalues.problem(raw)
    if unstorable is not None:
        raise fail(unstorable[1].replace("the value", "the message", 1), unstorable[0])
    raw = _without_nul(raw)
    role = raw.get("role")
    if not isinstance(role, str) or role not in ROLES:
        raise fail(f"role must be one of {', '.join(ROLES)}; got {role!r}", "invalid_role")

    content = raw.get("content", None)
    if content is None:
        content = ""
    if isinstance(content, str):
        pass
    elif isinstance(content, list):
        content = [_normalize_block(block, fail, f"content[{i}]") for i, block in enumerate(content)]
    else:
        raise fail(f"content must be a string or a list of content blocks, not {_kind(content)}", "invalid_content")

    tool_calls = raw.get("tool_calls")
    if tool_calls:
        if role != "assistant":
            raise fail("only assistant messages carry tool_calls", "invalid_content")
        content = _with_tool_calls(content, tool_calls, fail)
    tool_call_id = raw.get("tool_call_id")
    if tool_call_id is not None:
        if not isinstance(tool_call_id, str) or not tool_call_id:
            raise fail("tool_call_id must be a non-empty string", "invalid_content")
        if len(tool_call_id) > TOOL_ID_MAX:
            raise fail(f"tool_call_id is at most {TOOL_ID_MAX} characters", "invalid_content")
        if not isinstance(content, str):
            raise fail("a message with tool_call_id carries its result as string content", "invalid_content")
        content = [{"type": "tool_result", "tool_use_id": tool_call_id, "content": content}]
    if role == "tool" and not tool_result_ids(content):
        raise fail("a tool message carries tool_result blocks (or tool_call_id with string content)", "invalid_content")

    client_id = raw.get("client_id")
    if client_id is not None and (not isinstance(client_id, str) or not client_id or len(client_id) > CLIENT_ID_MAX):
        raise fail(f"client_id must be a non-empty string of at most {CLIENT_ID_MAX} characters", "invalid_client_id")

    created_at = raw.get("created_at")
    parsed_at = None
    if created_at is not None:
        if not isinstance(created_at, str):
            raise fail("created_at must be an ISO 8601 string", "invalid_created_at")
        parsed_at = parse_created_at(created_at)
        if parsed_at is None:
            raise fail(
                f"created_at {created_at!r} is not an ISO 8601 date-time between years 1 and 9999 "
                "with a UTC offset of at most 14 hours",
                "invalid_created_at",
            )

    metadata = raw.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise fail("metadata must be a JSON object", "invalid_metadata")
    return NormalizedMessage(role=role, content=content, client_id=client_id, created_at=parsed_at, metadata=metadata)


def parse_created_at(value: str) -> datetime | None:
    """An ISO 8601 date-time that can be stored and read back (offset within ±14:00, the moment
    within years 1–9999 in UTC); None otherwise. A naive value is taken as UTC."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    offset = parsed.utcoffset()
    # PostgreSQL takes offsets in whole minutes up to ±15:59; real ones run from -12:00 to +14:00.
    if offset is not None and (abs(offset) > MAX_UTC_OFFSET or offset % timedelta(minutes=1)):
        return None
    try:
        moment = parsed.astimezone(UTC) if offset is not None else parsed.replace(tzinfo=UTC)
    except OverflowError:
        return None
    return parsed if EARLIEST <= moment <= LATEST else None


def _normalize_block(raw: Any, fail: Callable[[str, str], MessageError], where: str) -> dict[str, Any]:
    """The block as it came when it is an object with a string ``type``; a type ctxweb reads is
    checked for what its readers rely on (a text's string, a call's id and name, a result's call id)."""
    block, kind = _typed(raw, fail, where)
    if kind == "text" and not isinstance(block.get("text"), str):
        raise fail(f"{where}: a text block needs a string 'text'", "invalid_content")
    if kind == "tool_use":
        if not _nonempty_str(block.get("id")) or not _nonempty_str(block.get("name")):
            raise fail(f"{where}: a tool_use block needs string 'id' and 'name'", "invalid_content")
        if len(block["id"]) > TOOL_ID_MAX:
            raise fail(f"{where}: a tool_use id is at most {TOOL_ID_MAX} characters", "invalid_content")
        if not isinstance(block.get("input", {}), dict):
            raise fail(f"{where}: tool_use 'input' must be an object", "invalid_content")
    if kind == "tool_result":
        if not _nonempty_str(block.get("tool_use_id")):
            raise fail(f"{where}: a tool_result block needs a string 'tool_use_id'", "invalid_content")
        if len(block["tool_use_id"]) > TOOL_ID_MAX:
            raise fail(f"{where}: a tool_use_id is at most {TOOL_ID_MAX} characters", "invalid_content")
        inner = block.get("content", "")
        if isinstance(inner, list):
            for j, part in enumerate(inner):
                _result_part(part, fail, f"{where}.content[{j}]")
        elif inner is not None and not isinstance(inner, str):
            raise fail(f"{where}: tool_result 'content' must be a string or a list of blocks", "invalid_content")
        if "is_error" in block and not isinstance(block["is_error"], bool):
            raise fail(f"{where}: tool_result 'is_error' must be true or false", "invalid_content")
    _check_part(block, kind, fail, where)
    return block


def block_as_it_came(raw: Any) -> dict[str, Any] | None:
    """A block a message can hold as it came (its caching hint aside: where a client put its marker is
    no part of what was said); None when it can't be (a reader then makes what it can of it)."""
    try:
        block = _normalize_block(raw, lambda detail, code: MessageError(detail, code=code), "block")
    except MessageError:
        return None
    return {k: v for k, v in block.items() if k != "cache_control"}


def _result_part(raw: Any, fail: Callable[[str, str], MessageError], where: str) -> None:
    # Calls and results pair up at a message's top level only: one nested in a result answers nothing.
    part, kind = _typed(raw, fail, where)
    if kind in ("tool_use", "tool_result"):
        raise fail(f"{where}: a tool_result's content can't hold a {kind} block", "invalid_content")
    if kind == "text" and not isinstance(part.get("text"), str):
        raise fail(f"{where}: a text block needs a string 'text'", "invalid_content")
    _check_part(part, kind, fail, where)


def _check_part(block: dict[str, Any], kind: str, fail: Callable[[str, str], MessageError], where: str) -> None:
    if kind == "image" and not isinstance(block.get("source"), dict):
        raise fail(f"{where}: an image block needs a 'source' object", "invalid_content")
    if kind == "thinking" and not isinstance(block.get("thinking", ""), str):
        raise fail(f"{where}: a thinking block needs a string 'thinking'", "invalid_content")
    if kind == "compaction" and not isinstance(block.get("content"), str | None):
        raise fail(f"{where}: a compaction block's 'content' is a string or null", "invalid_content")


def _typed(block: Any, fail: Callable[[str, str], MessageError], where: str) -> tuple[dict[str, Any], str]:
    if not isinstance(block, dict):
        raise fail(f"{where} must be a content block object, not {_kind(block)}", "invalid_content")
    kind = block.get("type")
    if not _nonempty_str(kind):
        raise fail(f"{where}.type must be a non-empty string (the block's type); got {kind!r}", "invalid_content")
    return block, str(kind)


def _with_tool_calls(
    content: str | list[dict[str, Any]], tool_calls: Any, fail: Callable[[str, str], MessageError]
) -> list[dict[str, Any]]:
    if not isinstance(tool_calls, list):
        raise fail("tool_calls must be a list", "invalid_content")
    blocks: list[dict[str, Any]] = []
    if isinstance(content, str):
        if content:
            blocks.append({"type": "text", "text": content})
    else:
        blocks.extend(content)
    for i, call in enumerate(tool_calls):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not _nonempty_str(call.get("id")) or not _nonempty_str(fn.get("name")):
            raise fail(f"tool_calls[{i}] needs 'id' and 'function': {{'name', 'arguments'}}", "invalid_content")
        if len(call["id"]) > TOOL_ID_MAX:
            raise fail(f"tool_calls[{i}].id is at most {TOOL_ID_MAX} characters", "invalid_content")
        arguments = fn.get("arguments", "{}")
        try:
            parsed = jsonvalues.loads(arguments) if isinstance(arguments, str) else arguments
        except ValueError:
            parsed = {"_raw": arguments}
        # The arguments' own JSON text may hold what the message's did not: check it as the body was.
        unstorable = jsonvalues.problem(parsed, where=f"tool_calls[{i}].function.arguments")
        if unstorable is not None:
            raise fail(unstorable[1], unstorable[0])
        parsed = _without_nul(parsed)
        if not isinstance(parsed, dict):
            parsed = {"_value": parsed}
        blocks.append({"type": "tool_use", "id": call["id"], "name": fn["name"], "input": parsed})
    return blocks


def _without_nul(value: Any) -> Any:
    """``value`` with every U+0000 in its strings (keys too) replaced; the same object when it has none."""
    if isinstance(value, str):
        return value.replace(NUL, REPLACEMENT) if NUL in value else value
    if isinstance(value, dict):
        items = [(_without_nul(k), _without_nul(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items(), strict=True)):
            return value
        return dict(items)
    if isinstance(value, list):
        out = [_without_nul(v) for v in value]
        return value if all(a is b for a, b in zip(out, value, strict=True)) else out
    return value


def _nonempty_str(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )
