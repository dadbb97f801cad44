"""OpenAI's Responses API read into the Anthropic-shaped conversation a session holds. One reading
serves the proxy (a request's ``input``, a response's ``output``) and the Codex import (a rollout's
``response_item`` lines), so a conversation recorded either way gives the same messages.

- ``instructions`` and the leading ``developer``/``system`` messages are the system prompt; such a
  message later on is a ``system`` message.
- A run of the model's items (its messages, reasoning, calls of any kind) is one assistant message;
  a run of call outputs is one ``tool`` message (``user`` when none of them answers a function call).
- ``function_call`` and ``custom_tool_call`` (a freeform tool: its ``input`` is text) are ``tool_use``
  blocks, their outputs ``tool_result`` blocks, so pruning and pairing treat them as any tool's; a
  custom call's block says so in ``openai_type`` and holds its text as ``input.input``.
- Every other item (``reasoning`` with its ``encrypted_content``, ``compaction``, ``web_search_call``,
  ``tool_search_call``/``_output``…) is a block as it came, less what only describes the transport
  (``status``, fields set to null, a client's ``internal_*`` annotations).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from .base import Block, Conversation, UniqueToolIds, content_block, make_message, nonempty_str, tool_input
from .openai import _image_from_url, _openai_tools

CUSTOM = "custom_tool_call"
# Codex compacting its own history: the request that asks the model for a summary (local compaction)
# ends with this user message; the provider's compaction (remote) is asked for by a last
# ``compaction_trigger`` item. The history after it starts over, the summary in a user message
# opening with CODEX_SUMMARY, or the provider's opaque ``compaction`` item.
CODEX_COMPACT_PROMPT = "You are performing a CONTEXT CHECKPOINT COMPACTION"
CODEX_SUMMARY = "Another language model started to solve this problem"
COMPACTION_ITEM = "compaction"
# In what is recorded of a request: its answer is no turn of the conversation (the client compacting it).
NO_REPLY = "ctxweb_no_reply"
# In what is recorded of a request: the response it continues (``previous_response_id``): the provider
# holds the history before its input, so it goes upstream as it came.
CONTINUES = "ctxweb_continues"
_CALLS = {"function_call", CUSTOM}
_OUTPUTS = {"function_call_output", "custom_tool_call_output"}
_PROMPT_ROLES = ("developer", "system")


def request_as_anthropic(obj: dict[str, Any]) -> dict[str, Any] | None:
    """A Responses API request as the Anthropic-shaped one ctxweb records of it: model, system prompt,
    tools, messages. None when it holds no input. The client asking its model to compact the
    conversation (``asks_to_compact``) is recorded without its last item, and ``NO_REPLY``: what the
    model answers is no turn of the conversation, as Codex's rollout keeps none of that exchange."""
    raw = obj.get("input")
    if isinstance(raw, str):
        raw = [{"type": "message", "role": "user", "content": raw}]
    if not isinstance(raw, list):
        return None
    compacting = asks_to_compact(raw)
    if compacting:
        raw = raw[:-1]
    conv = items_as_conversation(raw, instructions=obj.get("instructions"), tools=obj.get("tools"))
    flags: dict[str, Any] = {NO_REPLY: True} if compacting else {}
    if nonempty_str(obj.get("previous_response_id")):
        flags[CONTINUES] = obj["previous_response_id"]
    return flags | {
        "model": nonempty_str(obj.get("model")),
        "system": conv.system_prompt,
        "tools": conv.tools,
        "messages": [{"role": m["role"], "content": m["content"]} for m in conv.messages],
    }


def asks_to_compact(items: list[Any]) -> bool:
    """The request is a client compacting its conversation (Codex's local or remote compaction)."""
    last = items[-1] if items else None
    if not isinstance(last, dict):
        return False
    if last.get("type") == "compaction_trigger":
        return True
    return last.get("role") == "user" and _text_of(last.get("content")).lstrip().startswith(CODEX_COMPACT_PROMPT)


def is_compact_summary(message: dict[str, Any]) -> bool:
    """A user message holding the summary Codex compacted its history into (its next requests start
    over with it)."""
    if message.get("role") != "user":
        return False
    content = message.get("content")
    texts: list[Any] = (
        [content] if isinstance(content, str) else [b.get("text") for b in content or [] if isinstance(b, dict)]
    )
    return any(isinstance(t, str) and t.lstrip().startswith(CODEX_SUMMARY) for t in texts)


def holds_a_compaction(message: dict[str, Any]) -> bool:
    """A message that is a provider's opaque ``compaction`` item alone (OpenAI's: its summary is
    encrypted; the history starts over there). Anthropic's compaction block, which holds its summary
    as text at the start of a reply, is not one."""
    content = message.get("content")
    if message.get("role") != "assistant" or not isinstance(content, list) or len(content) != 1:
        return False
    block = content[0]
    return (
        isinstance(block, dict) and block.get("type") == COMPACTION_ITEM and not isinstance(block.get("content"), str)
    )


def response_as_message(response: Any) -> dict[str, Any] | None:
    """A ``response`` object (or one put back together from its events) as an Anthropic-shaped
    message: its output items as blocks, read as a request's input reads them when the client sends
    them back; its usage with the cached part apart, as Anthropic reports it. None when it is no
    response."""
    if not isinstance(response, dict) or not isinstance(response.get("output"), list):
        return None
    blocks: list[Block] = []
    for item in response["output"]:
        if isinstance(item, dict):
            blocks.extend(_model_blocks(item))
    message: dict[str, Any] = {"type": "message", "role": "assistant", "content": blocks}
    if isinstance(response.get("id"), str):
        message["id"] = response["id"]
    details = response.get("incomplete_details")
    message["stop_reason"] = details.get("reason") if isinstance(details, dict) else response.get("status")
    usage = response.get("usage")
    if isinstance(usage, dict):
        message["usage"] = usage_as_anthropic(usage)
    return message


def usage_as_anthropic(usage: dict[str, Any]) -> dict[str, Any]:
    """Responses usage (``input_tokens`` counts the cached part too) as Anthropic's (it does not)."""
    details = usage.get("input_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    cached = cached if isinstance(cached, int) and cached > 0 else 0
    total = usage.get("input_tokens")
    out: dict[str, Any] = {
        "input_tokens": total - cached if isinstance(total, int) else total,
        "output_tokens": usage.get("output_tokens"),
    }
    if cached:
        out["cache_read_input_tokens"] = cached
    return out


def items_as_conversation(
    items: list[Any],
    *,
    instructions: Any = None,
    tools: Any = None,
    model: str | None = None,
    key: str = "main",
    skipped: Counter[str] | None = None,
) -> Conversation:
    conv = Conversation(key=key, model=model, tools=responses_tools(tools))
    reader = ItemReader(conv, instructions=instructions, skipped=skipped)
    for item in items:
        reader.add(item)
    reader.close()
    return conv


class ItemReader:
    """Items read one at a time into ``conv``: a message is final (in ``conv.messages``) once an item
    of the other side comes, or ``close()``; ``conv.system_prompt`` grows while the prompt leads."""

    def __init__(self, conv: Conversation, *, instructions: Any = None, skipped: Counter[str] | None = None) -> None:
        self.conv = conv
        self.skipped = skipped if skipped is not None else Counter()
        self._system = [instructions] if nonempty_str(instructions) else []
        conv.system_prompt = "\n\n".join(self._system)
        self._ids = UniqueToolIds()
        self._side = ""  # the run being read: "model" (the model's items) or "output" (call outputs)
        self._blocks: list[Block] = []
        self._first_id: str | None = None  # the run's first item's id: its message's client id
        self._first_at: str | None = None  # when its first item was written (a file's timestamp)
        self._client_ids: set[str] = set()
        self._leading = True
        self._alone = False  # the run read is a compaction item: the next item starts another
        self._restarted = False  # the history started over: the prompt is settled

    def instructions_first(self, text: str) -> bool:
        """Begin the system prompt with ``text`` (a client's base instructions, kept apart from its
        items); False once a message was read (the prompt is settled then)."""
        if not self._leading:
            return False
        self._system.insert(0, text)
        self.conv.system_prompt = "\n\n".join(self._system)
        return True

    def restart(self) -> None:
        """The client's history starts over (it compacted it): its leading developer and system
        messages, sent again, are the system prompt already read."""
        self.close()
        self._leading = True
        self._restarted = True

    @property
    def open(self) -> bool:
        """A run is being read: its message is not final yet."""
        return bool(self._blocks)

    def close(self) -> None:
        if self._blocks:
            role = "assistant" if self._side == "model" else ("tool" if _answers_a_call(self._blocks) else "user")
            message = make_message(
                role, self._blocks, client_id=self._client_id(self._first_id), created_at=self._first_at
            )
            self.conv.messages.append(self._ids.apply(message))
        self._side, self._blocks, self._first_id, self._first_at = "", [], None, None

    def _client_id(self, given: str | None) -> str | None:
        """An item's id as its message's client id (a re-upload stores nothing twice), unique."""
        if given is None:
            return None
        cid, n = given[:190], 2
        while cid in self._client_ids:
            cid, n = f"{given[:190]}#{n}", n + 1
        self._client_ids.add(cid)
        return cid

    def add(self, item: Any, when: str | None = None) -> None:
        """Read one item; ``when``: the time a file says it was written (ISO 8601)."""
        kind = item.get("type", "message" if "role" in item else None) if isinstance(item, dict) else None
        if not isinstance(kind, str) or not kind:
            self.skipped["not_an_item"] += 1
            return
        role = item.get("role")
        if kind == "message" and role in _PROMPT_ROLES and self._leading:
            text = _text_of(item.get("content"))
            if text and not self._restarted:
                self._system.append(text)
                self.conv.system_prompt = "\n\n".join(self._system)
            return
        self._leading = False
        if kind == "message" and role != "assistant":
            self.close()
            said = "system" if role in _PROMPT_ROLES else "user"
            metadata = {"original_role": role} if role not in (*_PROMPT_ROLES, "user") else {}
            client_id = self._client_id(nonempty_str(item.get("id")))
            content = _input_content(item.get("content"))
            message = make_message(said, content, client_id=client_id, created_at=when, metadata=metadata)
            self.conv.messages.append(self._ids.apply(message))
            return
        side = "output" if kind in _OUTPUTS or kind.endswith("_output") else "model"
        # A provider's compaction stands alone: the response after it is another message.
        if side != self._side or kind == COMPACTION_ITEM or self._alone:
            self.close()
            self._side = side
        self._alone = kind == COMPACTION_ITEM
        if not self._blocks:
            self._first_id = nonempty_str(item.get("id")) or nonempty_str(item.get("call_id"))
            self._first_at = when
        self._blocks.extend(_output_blocks(item) if side == "output" else _model_blocks(item))


def responses_tools(raw: Any) -> list[dict[str, Any]]:
    """Function tools as ``{name, description, input_schema}``; the others (custom, web search,
    tool search…) as they came, with a name."""
    if not isinstance(raw, list):
        return []
    tools: list[dict[str, Any]] = []
    for tool in raw:
        if not isinstance(tool, dict):
            continue
        if tool.get("type", "function") == "function" and nonempty_str(tool.get("name")):
            tools.extend(_openai_tools([tool]))
        else:  # named by its type when it has no name (``web_search``), as a session's tools are
            tools.append(
                {"name": tool["type"], **tool} if nonempty_str(tool.get("type")) and "name" not in tool else tool
            )
    return tools


def as_it_came(item: dict[str, Any]) -> dict[str, Any]:
    """An item less what only describes its transport: ``status``, null fields, ``internal_*``."""
    return {k: v for k, v in item.items() if v is not None and k != "status" and not (k.startswith("internal_"))}


def _model_blocks(item: dict[str, Any]) -> list[Block]:
    kind = item.get("type", "message")
    if kind == "message":
        return _said(item.get("content"))
    call_id = nonempty_str(item.get("call_id"))
    if kind in _CALLS and call_id is not None:
        name = nonempty_str(item.get("name")) or "unknown_tool"
        if kind == CUSTOM:
            raw = item.get("input")
            return [{"type": "tool_use", "id": call_id, "name": name, "input": {"input": raw}, "openai_type": CUSTOM}]
        return [{"type": "tool_use", "id": call_id, "name": name, "input": tool_input(item.get("arguments"))}]
    return [content_block(as_it_came(item))]


def _output_blocks(item: dict[str, Any]) -> list[Block]:
    call_id = nonempty_str(item.get("call_id"))
    if item.get("type") in _OUTPUTS and call_id is not None:
        output = item.get("output")
        content: str | list[Block] = output if isinstance(output, str) else _input_content(output)
        block: Block = {"type": "tool_result", "tool_use_id": call_id, "content": content}
        if item.get("type") == "custom_tool_call_output":
            block["openai_type"] = "custom_tool_call_output"
        return [block]
    return [content_block(as_it_came(item))]


def _said(raw: Any) -> list[Block]:
    """An assistant message's content: ``output_text`` parts as text blocks (their annotations when
    there are any), a refusal as text, anything else as it came."""
    if isinstance(raw, str):
        return [{"type": "text", "text": raw}] if raw else []
    blocks: list[Block] = []
    for part in raw if isinstance(raw, list) else []:
        if isinstance(part, dict) and part.get("type") == "output_text" and isinstance(part.get("text"), str):
            block: Block = {"type": "text", "text": part["text"]}
            if part.get("annotations"):
                block["annotations"] = part["annotations"]
            blocks.append(block)
        elif isinstance(part, dict) and part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
            blocks.append({"type": "text", "text": part["refusal"]})
        elif part is not None:
            blocks.append(content_block(part))
    return blocks


def _input_content(raw: Any) -> str | list[Block]:
    """A user-side message's (or an output's) content: a string, or parts as blocks."""
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    blocks: list[Block] = []
    for part in raw if isinstance(raw, list) else [raw]:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text", "text") and isinstance(part.get("text"), str):
            blocks.append({"type": "text", "text": part["text"]})
        elif kind == "input_image" and (image := _image_from_url(part.get("image_url"))) is not None:
            blocks.append(image)
        else:
            blocks.append(content_block(as_it_came(part) if isinstance(part, dict) else part))
    return blocks


def _text_of(raw: Any) -> str:
    content = _input_content(raw)
    if isinstance(content, str):
        return content
    return "\n".join(b["text"] for b in content if b.get("type") == "text")


def _answers_a_call(blocks: list[Block]) -> bool:
    return any(b.get("type") == "tool_result" for b in blocks)
