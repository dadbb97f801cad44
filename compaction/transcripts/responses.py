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
_CALLS = {"function_call", CUSTOM}
_OUTPUTS = {"function_call_output", "custom_tool_call_output"}
_PROMPT_ROLES = ("developer", "system")


def request_as_anthropic(obj: dict[str, Any]) -> dict[str, Any] | None:
    """A Responses API request as the Anthropic-shaped one ctxweb records of it: model, system prompt,
    tools, messages. None when it holds no input (a request continuing from ``previous_response_id``
    alone still holds its new input)."""
    raw = obj.get("input")
    if isinstance(raw, str):
        raw = [{"type": "message", "role": "user", "content": raw}]
    if not isinstance(raw, list):
        return None
    conv = items_as_conversation(raw, instructions=obj.get("instructions"), tools=obj.get("tools"))
    return {
        "model": nonempty_str(obj.get("model")),
        "system": conv.system_prompt,
        "tools": conv.tools,
        "messages": [{"role": m["role"], "content": m["content"]} for m in conv.messages],
    }


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
    system = [instructions] if nonempty_str(instructions) else []
    ids = UniqueToolIds()
    side = ""  # the run being read: "model" (the model's items) or "output" (call outputs)
    blocks: list[Block] = []
    leading = True

    def flush() -> None:
        nonlocal side, blocks
        if blocks:
            role = "assistant" if side == "model" else ("tool" if _answers_a_call(blocks) else "user")
            conv.messages.append(ids.apply(make_message(role, blocks)))
        side, blocks = "", []

    for item in items:
        if not isinstance(item, dict):
            if skipped is not None:
                skipped["not_an_item"] += 1
            continue
        kind = item.get("type", "message" if "role" in item else None)
        role = item.get("role")
        if not isinstance(kind, str) or not kind:
            if skipped is not None:
                skipped["not_an_item"] += 1
            continue
        if kind == "message" and role in _PROMPT_ROLES and leading:
            text = _text_of(item.get("content"))
            if text:
                system.append(text)
            continue
        leading = False
        if kind == "message" and role != "assistant":
            flush()
            said = "system" if role in _PROMPT_ROLES else "user"
            metadata = {"original_role": role} if role not in (*_PROMPT_ROLES, "user") else {}
            conv.messages.append(ids.apply(make_message(said, _input_content(item.get("content")), metadata=metadata)))
            continue
        now = "output" if kind in _OUTPUTS or kind.endswith("_output") else "model"
        if now != side:
            flush()
            side = now
        blocks.extend(_output_blocks(item) if now == "output" else _model_blocks(item))
    flush()
    conv.system_prompt = "\n\n".join(system)
    return conv


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
