"""What differs between the APIs the proxy speaks, for what goes upstream with ``proxy_compaction``
on: how the session's compacted context becomes a request in the API's own format (``render``), and
how the API refuses a prompt as too long for the model's window (``too_long``). A dialect of
``api/proxy`` names its ``Wire``; ``services.proxy.upstream`` decides when either is used."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from compaction import context as engine_context

WINDOW_BOUNDS = (1_024, 10_000_000)  # tokens: a window some model has


@dataclass(frozen=True)
class Context:
    """The session's context as a model reads it now, in the shape sessions hold."""

    messages: list[dict[str, Any]]  # the checkpoint's summary first, when there is one, then the kept messages
    summarized: bool  # the first message is the summary


@dataclass(frozen=True)
class TooLong:
    """The upstream's refusal of a request as longer than the model's window, and what it says of it."""

    tokens: int | None  # the request's, by the upstream's count, when it says
    maximum: int | None  # the model's window, when it says


Render = Callable[[Context, dict[str, Any]], dict[str, Any]]  # (context, the caller's request) → what goes


@dataclass(frozen=True)
class Wire:
    render: Render
    too_long: Callable[[bytes], TooLong | None]  # a 400's body → the refusal as too long it is, if it is one


def _json(content: bytes) -> Any:
    try:
        return json.loads(content)
    except (ValueError, RecursionError):
        return None


# --------------------------------------------------------------------------- Anthropic's Messages API

MAX_CACHE_BREAKPOINTS = 4  # Anthropic refuses a request with more cache_control blocks than this


def anthropic_request(context: Context, body: dict[str, Any]) -> dict[str, Any]:
    """The caller's request (model, system, tools, settings, ``context_management``) with the context's
    messages. With thinking on, the assistant turn the request continues starts with a thought
    (``thinking_turn_kept``). Cache breakpoints: the stored messages' own are dropped (an agent moves
    its marker every request; the stored copies keep old ones), one goes after the summary (the prefix
    that changes only when a compaction runs) and one on the last message, within the API's limit of four."""
    messages = [_without_cache_marks(m) for m in engine_context.to_anthropic_messages(context.messages)]
    if engine_context.thinking_enabled(body):
        messages = engine_context.thinking_turn_kept(messages)
    budget = MAX_CACHE_BREAKPOINTS - _cache_marks(body.get("system")) - _cache_marks(body.get("tools"))
    for index in ([0] if context.summarized and messages else []) + [len(messages) - 1]:
        if budget > 0 and 0 <= index < len(messages):
            messages[index] = _with_cache_mark(messages[index])
            budget -= 1
    return {**body, "messages": messages}


def _cache_marks(value: Any) -> int:
    """The cache breakpoints a request's system prompt or tools carry: one per block or tool marked."""
    return (
        sum(1 for item in value if isinstance(item, dict) and "cache_control" in item) if isinstance(value, list) else 0
    )


def _without_cache_marks(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if not isinstance(content, list):
        return message
    return {**message, "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in content]}


def _with_cache_mark(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    blocks: list[dict[str, Any]] = (
        [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
    )
    if not blocks:
        return message
    blocks[-1] = {**blocks[-1], "cache_control": {"type": "ephemeral"}}
    return {**message, "content": blocks}


# Anthropic's refusal of a request longer than the model's window is this, as its whole message.
_ANTHROPIC_TOO_LONG = re.compile(r"prompt is too long: ([0-9]{1,12}) tokens > ([0-9]{1,12}) maximum")


def anthropic_too_long(content: bytes) -> TooLong | None:
    """A 400's body, when it has the whole shape of a refusal as too long: an ``invalid_request_error``
    whose message is all "prompt is too long: N tokens > M maximum", N over M, M a window some model
    has. Not a message that merely holds the phrase: a validation error quotes the caller's text."""
    answer = _json(content)
    error = answer.get("error") if isinstance(answer, dict) and answer.get("type") == "error" else None
    if not isinstance(error, dict) or error.get("type") != "invalid_request_error":
        return None
    said = _ANTHROPIC_TOO_LONG.fullmatch(error["message"]) if isinstance(error.get("message"), str) else None
    if said is None:
        return None
    tokens, maximum = int(said.group(1)), int(said.group(2))
    return TooLong(tokens, maximum) if tokens > maximum and _a_window(maximum) else None


def _a_window(tokens: int) -> bool:
    return WINDOW_BOUNDS[0] <= tokens <= WINDOW_BOUNDS[1]


ANTHROPIC_MESSAGES = Wire(render=anthropic_request, too_long=anthropic_too_long)


# --------------------------------------------------------------------------- OpenAI's APIs


def chat_request(context: Context, body: dict[str, Any]) -> dict[str, Any]:
    """The caller's Chat Completions request (model, tools, stream, stream_options, temperature …) with
    its leading system and developer messages as they came, then the context's messages in OpenAI's
    shape: an assistant's calls as ``tool_calls``, each result a ``tool`` message right after the call
    (a call whose result was summarized, or is not there, or a result whose call was, goes as text)."""
    sent = body.get("messages")
    leading = list(
        itertools.takewhile(
            lambda m: isinstance(m, dict) and m.get("role") in ("system", "developer"),
            sent if isinstance(sent, list) else [],
        )
    )
    paired = engine_context.to_anthropic_messages(context.messages)  # every call next to its result
    if paired and paired[-1]["role"] == "assistant":  # calls no result follows: OpenAI takes none
        last = paired[-1]
        paired[-1] = {**last, "content": [_said(b) if b.get("type") == "tool_use" else b for b in last["content"]]}
    messages = [_spoken(m) for m in engine_context.to_openai_messages(paired, system=None)]
    return {**body, "messages": leading + messages}


def _said(block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "text", "text": engine_context.block_as_text(block) or ""}


def _spoken(message: dict[str, Any]) -> dict[str, Any]:
    """An assistant message says something or calls a tool: one whose blocks were all reasoning says ''."""
    if message["role"] == "assistant" and message.get("content") is None and not message.get("tool_calls"):
        return {**message, "content": ""}
    return message


_FIGURE = "([0-9]{1,12})"
# OpenAI's refusals of a prompt longer than the window, as their whole message: (maximum, tokens).
_OPENAI_TOO_LONG = (
    re.compile(
        rf"This model's maximum context length is {_FIGURE} tokens\. However, your messages resulted in {_FIGURE}"
        r" tokens(?: \(including [0-9]{1,12} in the functions\))?\. Please reduce the length of the messages"
        r"(?: or functions)?\."
    ),
    re.compile(
        rf"This model's maximum context length is {_FIGURE} tokens\. However, you requested [0-9]{{1,12}} tokens"
        rf" \({_FIGURE} in the messages, [0-9]{{1,12}} in the completion\)\. Please reduce the length of the"
        r" messages or completion\."
    ),
)
_OPENAI_NO_FIGURES = re.compile(
    r"Your input exceeds the context window of this model\.(?: Please adjust your input and try again\.)?"
)
CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"


def openai_too_long(content: bytes) -> TooLong | None:
    """A 400's body, when it is OpenAI's refusal of a prompt as too long: an ``invalid_request_error``
    whose ``code`` is ``context_length_exceeded`` or whose message is all one of the API's wordings of
    it. The window and the request's size are read only from a whole message that names them ("This
    model's maximum context length is N tokens. However, your messages resulted in M tokens. …"),
    never from a phrase inside one: a validation error quotes the caller's text."""
    answer = _json(content)
    error = answer.get("error") if isinstance(answer, dict) else None
    if not isinstance(error, dict) or error.get("type") != "invalid_request_error":
        return None
    message = error["message"] if isinstance(error.get("message"), str) else ""
    for shape in _OPENAI_TOO_LONG:
        if said := shape.fullmatch(message):
            maximum, tokens = int(said.group(1)), int(said.group(2))
            return TooLong(tokens, maximum) if _a_window(maximum) else None
    if error.get("code") == CONTEXT_LENGTH_EXCEEDED or _OPENAI_NO_FIGURES.fullmatch(message):
        return TooLong(None, None)
    return None


OPENAI_CHAT = Wire(render=chat_request, too_long=openai_too_long)
