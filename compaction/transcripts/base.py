"""What every transcript reader shares: the result types and the canonical message builders.

A transcript is read into ``Conversation``s of canonical messages: ``{"role", "content", "client_id",
"created_at", "metadata"}`` with Anthropic-style content blocks. A block a message can hold is kept
as it came (``tool_reference`` in a tool result, server tool blocks, types not known yet: as the proxy
stores what a client sends); a malformed one is made into what it can be (a tool call's JSON-text
input parsed) or a text block holding its JSON, so nothing is dropped and every block is one ctxweb
accepts.

Within one conversation every ``tool_use`` id is unique: when a transcript reuses a call id (tau-bench
and SWE-agent do), the later call is renamed ``<id>_2``, ``<id>_3``… and the results that follow
point at the newest call of that id, as OpenAI pairs them; the original ids are kept in metadata.

Standard library only: no Django, no Celery, no I/O beyond the bytes a caller passes in.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import jsonvalues
from ..messages import block_as_it_came, parse_created_at

Message = dict[str, Any]
Block = dict[str, Any]


class TranscriptError(ValueError):
    """The input is not the named format at all (not JSON, not any accepted shape)."""


@dataclass
class UsagePoint:
    """What the API reported for one response: the context it saw and what it wrote.

    ``messages[:message_index]`` of the conversation is (roughly) the context the model saw;
    ``messages[message_index]`` is the assistant message that response produced.
    """

    message_index: int
    context_tokens: int
    output_tokens: int
    request_id: str | None


@dataclass
class ResponseUsage:
    """What the API billed for one response, as the transcript's newest line about it says (a response
    written over several lines reports its usage on each; the last one holds). ``usage`` is the API's own
    object: Anthropic's split (``api="anthropic"``), or OpenAI's, whose input counts its cached part
    (``api="openai"``)."""

    response_id: str
    api: str
    usage: dict[str, Any]
    model: str | None
    created_at: str | None  # the response's first line's time


@dataclass
class Conversation:
    key: str  # "main", "sidechain-<n>", "episode-<k>", "request-<k>"
    title: str | None = None
    model: str | None = None
    system_prompt: str = ""
    tools: list[dict[str, Any]] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    usage_points: list[UsagePoint] = field(default_factory=list)
    responses: dict[str, ResponseUsage] = field(default_factory=dict)  # by response id, in order of appearance
    segment_starts: list[int] = field(default_factory=list)
    # segment start -> what the compaction marker said of itself (Claude Code: trigger, pre_tokens)
    boundary_facts: dict[int, dict[str, Any]] = field(default_factory=dict)
    sidechain: bool = False
    external_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)  # small facts about the source (agent id, reward…)


@dataclass
class Transcript:
    format: str
    conversations: list[Conversation] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    cleaned: dict[str, int] = field(default_factory=dict)  # what was made storable (jsonvalues.clean), by kind

    @property
    def main(self) -> Conversation | None:
        """The first conversation that is not a sub-agent's."""
        return next((c for c in self.conversations if not c.sidechain), None)


def read_json(text: str, fmt: str, conversations: Callable[[Any, Counter[str]], list[Conversation]]) -> Transcript:
    """A JSON (or JSON Lines) transcript, cleaned so it can be stored, split into ``conversations``."""
    cleaned: Counter[str] = Counter()
    value = jsonvalues.clean(load_json(text, fmt), cleaned)
    skipped: Counter[str] = Counter()
    found = conversations(value, skipped)
    return Transcript(
        format=fmt,
        conversations=found,
        skipped={k: n for k, n in skipped.items() if n},
        cleaned=dict(cleaned),
    )


def decode(data: bytes | str) -> str:
    """Text without a byte-order mark; undecodable bytes become U+FFFD rather than failing."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes | bytearray) else str(data)
    return text.removeprefix("\ufeff")


def make_message(
    role: str,
    content: str | list[Block],
    *,
    client_id: str | None = None,
    created_at: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> Message:
    return {
        "role": role,
        "content": content,
        "client_id": client_id,
        "created_at": created_at,
        "metadata": metadata or {},
    }


def iso_or_none(value: Any) -> str | None:
    """``value`` when it is an ISO 8601 date-time that can be stored (``parse_created_at``), else None."""
    if not isinstance(value, str) or not value:
        return None
    return value if parse_created_at(value) is not None else None


def nonempty_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def as_json_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return str(value)


def content_of(raw: Any) -> str | list[Block]:
    """Anthropic-style content (a string or blocks) → canonical content."""
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, dict):
        return [content_block(raw)]
    if isinstance(raw, list):
        return [content_block(b) for b in raw]
    return as_json_text(raw)


def content_block(raw: Any) -> Block:
    """One block as it came, when a message can hold it so (any type: ``tool_reference``, server tool
    blocks, types not known yet — as the proxy stores what a client sends, so an import of a
    client's transcript equals the proxy's recording of it); else what can be made of it: a tool
    call's input parsed, a missing field filled, a malformed block as text holding its JSON."""
    if isinstance(raw, str):
        return {"type": "text", "text": raw}
    if not isinstance(raw, dict):
        return {"type": "text", "text": as_json_text(raw)}
    kept = block_as_it_came(raw)
    if kept is not None:
        return kept
    kind = raw.get("type")
    if kind == "text":
        text = raw.get("text")
        return {"type": "text", "text": text if isinstance(text, str) else ("" if text is None else as_json_text(text))}
    if kind == "tool_use" and nonempty_str(raw.get("id")) and nonempty_str(raw.get("name")):
        return {"type": "tool_use", "id": raw["id"], "name": raw["name"], "input": tool_input(raw.get("input"))}
    if kind == "tool_result" and nonempty_str(raw.get("tool_use_id")):
        block: Block = {
            "type": "tool_result",
            "tool_use_id": raw["tool_use_id"],
            "content": tool_result_content(raw.get("content")),
        }
        if raw.get("is_error") is True:
            block["is_error"] = True
        return block
    if kind == "image" and isinstance(raw.get("source"), dict):
        return {"type": "image", "source": dict(raw["source"])}
    if kind == "document" and isinstance(raw.get("source"), dict):
        return {k: v for k, v in raw.items() if k != "cache_control"}
    if kind == "thinking":
        thinking, signature = raw.get("thinking"), raw.get("signature")
        return {
            "type": "thinking",
            "thinking": thinking if isinstance(thinking, str) else "",
            "signature": signature if isinstance(signature, str) else "",
        }
    if kind == "redacted_thinking":
        data = raw.get("data")
        return {"type": "redacted_thinking", "data": data if isinstance(data, str) else ""}
    label = kind if isinstance(kind, str) and kind else "block"
    return {"type": "text", "text": f"[{label}] {as_json_text(raw)}"}


def tool_input(raw: Any) -> dict[str, Any]:
    """A tool call's input as an object: JSON text is parsed, anything else is wrapped."""
    if isinstance(raw, dict):
        return raw
    if raw is None:
        return {}
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            parsed = jsonvalues.clean(jsonvalues.loads(raw, allow_nan=True))  # recorded: cleaned, never refused
        except ValueError:
            return {"_raw": raw}
        return parsed if isinstance(parsed, dict) else {"_value": parsed}
    return {"_value": raw}


def tool_result_content(raw: Any) -> str | list[Block]:
    """A tool result's content: a string, or a list of text and image blocks."""
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    parts = raw if isinstance(raw, list) else [raw]
    blocks = []
    for part in parts:
        block = content_block(part)
        if block["type"] in ("tool_use", "tool_result"):  # a call or result pairs up at a message's top level only
            block = {"type": "text", "text": f"[{block['type']}] {as_json_text(part)}"}
        blocks.append(block)
    return blocks


class UniqueToolIds:
    """Makes every tool_use id unique within one conversation; results follow the newest call."""

    def __init__(self) -> None:
        self._used: set[str] = set()
        self._latest: dict[str, str] = {}

    def apply(self, message: Message) -> Message:
        content = message["content"]
        if isinstance(content, str):
            return message
        for block in content:
            if block.get("type") == "tool_use":
                original = block["id"]
                new = original
                n = 2
                while new in self._used:
                    new = f"{original}_{n}"
                    n += 1
                self._used.add(new)
                self._latest[original] = new
                if new != original:
                    block["id"] = new
                    message["metadata"].setdefault("original_tool_use_ids", {})[new] = original
            elif block.get("type") == "tool_result":
                original = block["tool_use_id"]
                new = self._latest.get(original, original)
                if new != original:
                    block["tool_use_id"] = new
                    message["metadata"].setdefault("original_tool_use_ids", {})[new] = original
        return message


def jsonl_event(raw: str | bytes, cleaned: Counter[str]) -> dict[str, Any] | tuple[str, str] | None:
    """One line of a JSON Lines transcript: its event (an object, made storable: ``cleaned`` counts
    what changed), None for a blank line, or ``(kind, why)`` when it holds no event."""
    if isinstance(raw, bytes | bytearray):
        raw = raw.decode("utf-8", errors="replace")
    line = raw.strip().removeprefix("\ufeff").strip()
    if not line:
        return None
    try:
        event = jsonvalues.loads(line, allow_nan=True)
    except ValueError as exc:
        return "invalid_json", f"not JSON ({exc})"
    if not isinstance(event, dict):
        return "not_an_object", "a JSON value that is not an object"
    cleaned_event: dict[str, Any] = jsonvalues.clean(event, cleaned)
    return cleaned_event


def load_json(text: str, fmt: str) -> Any:
    if not text.strip():
        raise TranscriptError(f"The file is empty; an {fmt} transcript is JSON.")
    try:
        return jsonvalues.loads(text, allow_nan=True)
    except ValueError as exc:
        whole_error = exc
    lines = [line for line in text.split("\n") if line.strip()]
    if len(lines) > 1:  # JSONL: one message, conversation or request per line
        try:
            return [jsonvalues.loads(line, allow_nan=True) for line in lines]
        except ValueError:
            pass
    err = whole_error
    detail = f"line {err.lineno}, column {err.colno}: {err.msg}" if isinstance(err, json.JSONDecodeError) else str(err)
    raise TranscriptError(f"This is not an {fmt} transcript: it is not valid JSON or JSON Lines ({detail}).")


def json_kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )
