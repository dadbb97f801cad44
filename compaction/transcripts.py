"""Readers that turn recorded agent transcripts into ctxweb's canonical messages.

Formats (``FORMATS``):

- ``claude-code``: Claude Code's JSONL session files. The reader lives in ``transcripts_claude``
  (``ClaudeCodeReader``, incremental) and is re-exported here. It keeps FILE ORDER and does not
  prune rewound branches: a hook uploads the file a few lines at a time, and an incremental reader
  cannot know that a branch will be abandoned later, so the one-shot import does exactly what the
  incremental one does (lines carry ``parent_uuid`` in metadata for whoever wants the tree).
- ``openai``: OpenAI chat messages: a list of messages, ``{"messages": [...]}``, a SWE-agent
  ``.traj`` (``{"history": [...]}``), a tau-bench file (a list of ``{task_id, reward, info, traj,
  trial}`` episodes, one conversation each), or JSONL with one of those per line.
- ``anthropic``: an Anthropic Messages API request (``{model?, system?, tools?, messages}``) or a
  list (or JSONL) of them, one conversation each.

A canonical message is ``{"role", "content", "client_id", "created_at", "metadata"}`` with
Anthropic-style content blocks (``text``, ``tool_use``, ``tool_result``, ``image``, ``thinking``,
``redacted_thinking``, ``document``). A block of any other kind is kept as a text block holding its
JSON, so nothing is dropped and every block is one ctxweb accepts.

Within one conversation every ``tool_use`` id is unique: when a transcript reuses a call id (tau-bench
and SWE-agent do), the later call is renamed ``<id>_2``, ``<id>_3``… and the results that follow
point at the newest call of that id, as OpenAI pairs them; the original ids are kept in metadata.

Standard library only: no Django, no Celery, no I/O beyond the bytes a caller passes in.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import jsonvalues
from .messages import parse_created_at

if TYPE_CHECKING:
    from .transcripts_claude import ClaudeCodeReader

__all__ = [
    "FORMATS",
    "ClaudeCodeReader",
    "Conversation",
    "Transcript",
    "TranscriptError",
    "UsagePoint",
    "read_transcript",
]

FORMATS = ("claude-code", "openai", "anthropic")

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
class Conversation:
    key: str  # "main", "sidechain-<n>", "episode-<k>", "request-<k>"
    title: str | None = None
    model: str | None = None
    system_prompt: str = ""
    tools: list[dict[str, Any]] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    usage_points: list[UsagePoint] = field(default_factory=list)
    segment_starts: list[int] = field(default_factory=list)
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


def read_transcript(data: bytes | str, fmt: str) -> Transcript:
    """Parse a whole transcript file. ``TranscriptError`` when it is not ``fmt`` at all."""
    name = (fmt or "").strip().lower().replace("_", "-")
    if name not in FORMATS:
        raise TranscriptError(f"Unknown transcript format {fmt!r}; use one of: {', '.join(FORMATS)}.")
    text = decode(data)
    if name == "claude-code":
        from .transcripts_claude import ClaudeCodeReader

        reader = ClaudeCodeReader()
        reader.feed(text.split("\n"))
        reader.finish()
        return Transcript(
            format=name,
            conversations=reader.conversations,
            skipped=dict(reader.skipped),
            cleaned=dict(reader.cleaned),
        )
    cleaned: Counter[str] = Counter()
    value = jsonvalues.clean(_load_json(text, name), cleaned)
    skipped: Counter[str] = Counter()
    conversations = _openai(value, skipped) if name == "openai" else _anthropic(value, skipped)
    return Transcript(
        format=name,
        conversations=conversations,
        skipped={k: n for k, n in skipped.items() if n},
        cleaned=dict(cleaned),
    )


def __getattr__(name: str) -> Any:
    # ``ClaudeCodeReader`` lives in transcripts_claude, which imports this module; load it lazily.
    if name == "ClaudeCodeReader":
        from .transcripts_claude import ClaudeCodeReader

        return ClaudeCodeReader
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ----------------------------------------------------------------------------- shared helpers


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
    """One block → a canonical block; an unknown or malformed block becomes text holding its JSON."""
    if isinstance(raw, str):
        return {"type": "text", "text": raw}
    if not isinstance(raw, dict):
        return {"type": "text", "text": as_json_text(raw)}
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
        if block["type"] not in ("text", "image"):
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


def _load_json(text: str, fmt: str) -> Any:
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


def _object(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


# ----------------------------------------------------------------------------- OpenAI


def _openai(value: Any, skipped: Counter[str]) -> list[Conversation]:
    shapes = 'a list of chat messages, {"messages": [...]}, a SWE-agent .traj or a tau-bench episode list'
    if isinstance(value, dict):
        if isinstance(value.get("history"), list):
            return [_swe_agent(value, skipped)]
        if isinstance(value.get("messages"), list):
            return [_openai_request(value, "main", skipped)]
        if isinstance(value.get("traj"), list):
            return [_tau_episode(value, 0, "main", skipped)]
        keys = ", ".join(sorted(map(str, value))[:8]) or "none"
        raise TranscriptError(
            f"This is not an OpenAI transcript: an object without 'messages' or 'history' "
            f"(keys: {keys}). Expected {shapes}."
        )
    if not isinstance(value, list):
        raise TranscriptError(f"This is not an OpenAI transcript: the JSON is {_kind(value)}. Expected {shapes}.")
    dicts = [item for item in value if isinstance(item, dict)]
    if dicts and all(isinstance(d.get("traj"), list) for d in dicts):
        skipped["not_an_episode"] += len(value) - len(dicts)
        return [_tau_episode(ep, k, f"episode-{k}", skipped) for k, ep in enumerate(dicts)]
    if dicts and all(isinstance(d.get("messages"), list) and "role" not in d for d in dicts):
        skipped["not_a_conversation"] += len(value) - len(dicts)
        return [_openai_request(item, f"episode-{k}", skipped) for k, item in enumerate(dicts)]
    if not value:
        return []
    if any(isinstance(d.get("role"), str) for d in dicts):
        return [_openai_conversation(value, "main", skipped)]
    raise TranscriptError(
        f"This is not an OpenAI transcript: a list, but not of chat messages (no item has a 'role'). Expected {shapes}."
    )


def _openai_request(obj: dict[str, Any], key: str, skipped: Counter[str]) -> Conversation:
    tools = obj.get("tools") if isinstance(obj.get("tools"), list) else obj.get("functions")
    return _openai_conversation(
        obj["messages"], key, skipped, model=nonempty_str(obj.get("model")), tools=_openai_tools(tools)
    )


def _swe_agent(obj: dict[str, Any], skipped: Counter[str]) -> Conversation:
    config = obj.get("replay_config")
    if isinstance(config, str):  # older SWE-agent versions store it as JSON text
        try:
            config = jsonvalues.clean(jsonvalues.loads(config, allow_nan=True))
        except ValueError:
            config = None
    config = config if isinstance(config, dict) else {}
    agent = _object(config.get("agent"))
    model_cfg = _object(agent.get("model"))
    problem = _object(config.get("problem_statement"))
    title = nonempty_str(problem.get("id")) or nonempty_str(agent.get("name"))
    info = _object(obj.get("info"))
    metadata = {"source": "swe-agent"}
    if nonempty_str(info.get("exit_status")):
        metadata["exit_status"] = info["exit_status"]
    conv = _openai_conversation(obj["history"], "main", skipped, model=nonempty_str(model_cfg.get("name")))
    conv.title = f"SWE-agent: {title}" if title else "SWE-agent trajectory"
    conv.metadata.update(metadata)
    return conv


def _tau_episode(ep: dict[str, Any], k: int, key: str, skipped: Counter[str]) -> Conversation:
    conv = _openai_conversation(ep["traj"], key, skipped)
    task_id, trial = ep.get("task_id"), ep.get("trial")
    title = f"task {task_id}" if task_id is not None else f"episode {k}"
    if trial is not None:
        title += f", trial {trial}"
    conv.title = title
    conv.metadata.update({name: ep[name] for name in ("task_id", "trial", "reward") if name in ep})
    return conv


def _openai_tools(raw: Any) -> list[dict[str, Any]]:
    """OpenAI tool definitions → Anthropic-style ``{name, description, input_schema}``."""
    if not isinstance(raw, list):
        return []
    tools = []
    for item in raw:
        if not isinstance(item, dict):
            continue
        fn = nested if isinstance(nested := item.get("function"), dict) else item
        if "input_schema" in fn or not nonempty_str(fn.get("name")):
            tools.append(dict(fn))
            continue
        tool: dict[str, Any] = {"name": fn["name"]}
        if isinstance(fn.get("description"), str):
            tool["description"] = fn["description"]
        tool["input_schema"] = (
            fn.get("parameters") if isinstance(fn.get("parameters"), dict) else {"type": "object", "properties": {}}
        )
        tools.append(tool)
    return tools


def _openai_conversation(
    raw_messages: list[Any],
    key: str,
    skipped: Counter[str],
    *,
    model: str | None = None,
    tools: list[dict[str, Any]] | None = None,
) -> Conversation:
    conv = Conversation(key=key, model=model, tools=tools or [])
    ids = UniqueToolIds()
    pending: list[tuple[str, str]] = []  # calls not answered yet: (id, name)
    system_parts: list[str] = []
    leading = True
    auto_ids = 0
    for raw in raw_messages:
        if not isinstance(raw, dict):
            skipped["not_a_message"] += 1
            continue
        role = raw.get("role")
        metadata: dict[str, Any] = {}
        if isinstance(raw.get("message_type"), str):  # SWE-agent history
            metadata["message_type"] = raw["message_type"]
        if isinstance(raw.get("name"), str) and role in ("user", "assistant", "system"):
            metadata["name"] = raw["name"]
        if role in ("system", "developer"):
            if leading:
                text = _openai_text(raw.get("content"))
                if text:
                    system_parts.append(text)
                continue
            msg = make_message("system", _openai_content(raw.get("content")), metadata=metadata)
        elif role == "assistant":
            if isinstance(raw.get("reasoning_content"), str) and raw["reasoning_content"]:
                # Reasoning models' own notes: never sent back to the model, so kept aside, not as content.
                metadata["reasoning"] = raw["reasoning_content"]
            content, calls, auto_ids = _openai_assistant(raw, auto_ids)
            pending.extend(calls)
            msg = make_message("assistant", content, metadata=metadata)
        elif role in ("tool", "function"):
            msg = _openai_tool_message(raw, pending, metadata)
        else:
            if role != "user":
                metadata["original_role"] = role if isinstance(role, str) else _kind(role)
            msg = make_message("user", _openai_content(raw.get("content")), metadata=metadata)
        leading = False
        if isinstance(raw.get("id"), str) and raw["id"]:
            msg["client_id"] = raw["id"][:200]
        msg["created_at"] = iso_or_none(raw.get("created_at")) or iso_or_none(raw.get("timestamp"))
        conv.messages.append(ids.apply(msg))
    conv.system_prompt = "\n\n".join(system_parts)
    _unique_client_ids(conv.messages)
    return conv


def _openai_assistant(raw: dict[str, Any], auto_ids: int) -> tuple[str | list[Block], list[tuple[str, str]], int]:
    content = _openai_content(raw.get("content"))
    if content == "" and isinstance(raw.get("refusal"), str):
        content = raw["refusal"]
    calls = listed if isinstance(listed := raw.get("tool_calls"), list) else []
    if isinstance(raw.get("function_call"), dict):  # legacy function calling
        calls = [*calls, {"function": raw["function_call"]}]
    if not calls:
        return content, [], auto_ids
    blocks: list[Block] = []
    if isinstance(content, str):
        if content:
            blocks.append({"type": "text", "text": content})
    else:
        blocks.extend(content)
    answered: list[tuple[str, str]] = []
    for call in calls:
        if not isinstance(call, dict):
            blocks.append({"type": "text", "text": f"[tool_call] {as_json_text(call)}"})
            continue
        fn = call.get("function") if isinstance(call.get("function"), dict) else call.get("custom")
        fn = fn if isinstance(fn, dict) else call
        name = nonempty_str(fn.get("name")) or "unknown_tool"
        call_id = nonempty_str(call.get("id"))
        if call_id is None:
            auto_ids += 1
            call_id = f"call_auto_{auto_ids}"
        arguments = fn.get("arguments", fn.get("input"))
        blocks.append({"type": "tool_use", "id": call_id, "name": name, "input": tool_input(arguments)})
        answered.append((call_id, name))
    return blocks, answered, auto_ids


def _openai_tool_message(raw: dict[str, Any], pending: list[tuple[str, str]], metadata: dict[str, Any]) -> Message:
    listed = raw.get("tool_call_ids")  # SWE-agent: one output may answer several calls
    call_ids = [i for i in listed if nonempty_str(i)] if isinstance(listed, list) else []
    if not call_ids and nonempty_str(raw.get("tool_call_id")):
        call_ids = [raw["tool_call_id"]]
    if not call_ids and pending:  # legacy "function" role or a missing id: the oldest unanswered call
        name = raw.get("name")
        match = next((p for p in pending if p[1] == name), pending[0])
        call_ids = [match[0]]
    content = tool_result_content(_openai_content(raw.get("content")))
    if not call_ids:
        metadata["orphan_tool_output"] = True
        return make_message("user", content, metadata=metadata)
    for call_id in call_ids:
        for p in pending:
            if p[0] == call_id:
                pending.remove(p)
                break
    if len(call_ids) > 1:
        # One output answers several calls (SWE-agent): it goes in the first result, the others are empty.
        metadata["tool_call_ids"] = list(call_ids)
    blocks: list[Block] = [{"type": "tool_result", "tool_use_id": call_ids[0], "content": content}]
    blocks += [{"type": "tool_result", "tool_use_id": i, "content": ""} for i in call_ids[1:]]
    return make_message("tool", blocks, metadata=metadata)


def _openai_content(raw: Any) -> str | list[Block]:
    """OpenAI content: a string, null, or a list of parts (``text``, ``image_url``…) → canonical content."""
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    parts = raw if isinstance(raw, list) else [raw]
    blocks: list[Block] = []
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("text", "input_text", "output_text") and isinstance(part.get("text"), str):
            blocks.append({"type": "text", "text": part["text"]})
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            blocks.append({"type": "text", "text": part["refusal"]})
        elif kind in ("image_url", "input_image"):
            image = _image_from_url(part.get("image_url"))
            blocks.append(image or {"type": "text", "text": f"[{kind}] {as_json_text(part)}"})
        else:
            blocks.append(content_block(part))
    return blocks


def _image_from_url(raw: Any) -> Block | None:
    url = nonempty_str(raw.get("url") if isinstance(raw, dict) else raw)
    if url is None:
        return None
    if url.startswith("data:") and ";base64," in url:
        media_type, data = url[5:].split(";base64,", 1)
        return {"type": "image", "source": {"type": "base64", "media_type": media_type or "image/png", "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _openai_text(raw: Any) -> str:
    content = _openai_content(raw)
    if isinstance(content, str):
        return content
    return "\n".join(b["text"] for b in content if b.get("type") == "text")


def _unique_client_ids(messages: list[Message]) -> None:
    seen: set[str] = set()
    for msg in messages:
        cid = msg["client_id"]
        if cid is None:
            continue
        n = 2
        while msg["client_id"] in seen:
            msg["client_id"] = f"{cid}#{n}"
            n += 1
        seen.add(msg["client_id"])


# ----------------------------------------------------------------------------- Anthropic


def _anthropic(value: Any, skipped: Counter[str]) -> list[Conversation]:
    expected = "Expected a Messages API request {model?, system?, tools?, messages: [...]} or a list of them."
    if isinstance(value, dict):
        if not isinstance(value.get("messages"), list):
            keys = ", ".join(sorted(map(str, value))[:8]) or "none"
            raise TranscriptError(
                f"This is not an Anthropic request: an object without a 'messages' list (keys: {keys}). {expected}"
            )
        return [_anthropic_request(value, "main", skipped)]
    if not isinstance(value, list):
        raise TranscriptError(f"This is not an Anthropic request: the JSON is {_kind(value)}. {expected}")
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
