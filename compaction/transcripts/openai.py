"""OpenAI chat transcripts: a list of messages, ``{"messages": [...]}``, a SWE-agent ``.traj``
(``{"history": [...]}``), a tau-bench file (a list of ``{task_id, reward, info, traj, trial}``
episodes, one conversation each), or JSONL with one of those per line."""

from __future__ import annotations

from collections import Counter
from typing import Any

from .. import jsonvalues
from .base import (
    Block,
    Conversation,
    Message,
    Transcript,
    TranscriptError,
    UniqueToolIds,
    as_json_text,
    content_block,
    iso_or_none,
    json_kind,
    make_message,
    nonempty_str,
    read_json,
    tool_input,
    tool_result_content,
)

FORMAT = "openai"


def read(text: str) -> Transcript:
    return read_json(text, FORMAT, _conversations)


def _conversations(value: Any, skipped: Counter[str]) -> list[Conversation]:
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
        raise TranscriptError(f"This is not an OpenAI transcript: the JSON is {json_kind(value)}. Expected {shapes}.")
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
                metadata["original_role"] = role if isinstance(role, str) else json_kind(role)
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


def _object(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


# ----------------------------------------------------------------------------- the proxy's wire


def chat_request_as_anthropic(obj: dict[str, Any]) -> dict[str, Any] | None:
    """An OpenAI Chat Completions request as the Anthropic-shaped one ctxweb records of it: model,
    system prompt (the leading system and developer messages), tools, messages. (Not ``user``: it
    names the end user, who may hold many conversations, not the conversation.) Reading a longer
    history of the same conversation gives the same messages first. None when the request holds no
    list of messages."""
    if not isinstance(obj.get("messages"), list):
        return None
    conv = _openai_request(obj, "request", Counter())
    body: dict[str, Any] = {
        "model": conv.model,
        "system": conv.system_prompt,
        "tools": conv.tools,
        "messages": [{"role": m["role"], "content": m["content"]} for m in conv.messages],
    }
    return body


def completion_as_message(completion: Any) -> dict[str, Any] | None:
    """A ``chat.completion`` (or one put back together from its chunks) as an Anthropic-shaped
    message: its first choice's text and tool calls as blocks, its finish reason, and its usage as
    input and output tokens. None when it holds no choice."""
    choices = completion.get("choices") if isinstance(completion, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
    if choice is None or not isinstance(choice.get("message"), dict):
        return None
    content, _, _ = _openai_assistant(choice["message"], 0)
    blocks = content if isinstance(content, list) else ([{"type": "text", "text": content}] if content else [])
    message: dict[str, Any] = {"type": "message", "role": "assistant", "content": blocks}
    if isinstance(completion.get("id"), str):
        message["id"] = completion["id"]
    message["stop_reason"] = choice.get("finish_reason")
    usage = completion.get("usage")
    if isinstance(usage, dict):
        message["usage"] = {"input_tokens": usage.get("prompt_tokens"), "output_tokens": usage.get("completion_tokens")}
    return message
