"""The wire formats the proxy speaks: Anthropic's Messages API (``/proxy/anthropic/…``), OpenAI's
Chat Completions and its Responses API (``/proxy/openai/…``). What differs between them, for the
proxy: where requests go; how ctxweb's own refusals are worded (so the caller's SDK raises its
usual error); what of a request is recorded (an OpenAI request is read into the Anthropic shape
sessions hold); how an answer, whole or streamed, is read back into the model's message; how a
stream the upstream broke off is ended for the caller; whether a project's own key applies
(Anthropic only); and how transparent compaction renders the session's context in the API's format
and reads its refusal as too long (``wire``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from django.conf import settings
from django.http import JsonResponse

from compaction.transcripts.openai import chat_request_as_anthropic, completion_as_message
from compaction.transcripts.responses import request_as_anthropic, response_as_message
from sessions_app.api.proxy.stream import ChunkAccumulator, MessageAccumulator, ResponseAccumulator
from sessions_app.services.provider_usage import Used, anthropic_used, chat_used, responses_used
from sessions_app.services.proxy.identity import conversation_of
from sessions_app.services.proxy.wire import ANTHROPIC_MESSAGES, OPENAI_CHAT, OPENAI_RESPONSES, Wire


class Accumulator(Protocol):
    complete: bool
    truncated: bool  # past its limit: what came after is not in ``message``
    error: dict[str, Any] | None

    def feed(self, data: bytes) -> None: ...

    @property
    def message(self) -> dict[str, Any]: ...

    @property
    def raw(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Dialect:
    upstream_url: Callable[[], str]
    refuse: Callable[[int, str, str], JsonResponse]  # (status, error type, message)
    accumulator: Callable[[int | None], Accumulator]  # (the bytes of stream whose content is kept)
    reply_of: Callable[[Any], dict[str, Any] | None]  # a whole answer's body, parsed → the model's message
    used_of: Callable[[Any], Used]  # a whole answer's body, parsed, or a stream's ``raw`` → its usage
    recorded: Callable[[dict[str, Any]], dict[str, Any] | None]  # a request → what is recorded of it
    broke_off: Callable[[str], bytes]  # the end of a stream the upstream broke off, for the caller
    own_key_header: str  # where the caller's own key goes, for the refusal that asks for it
    project_key: bool  # a request without a key of its own may use the project's
    rate_limited: Callable[[str], JsonResponse]  # a 429 past a refusing budget, as the API words one
    # How the session's compacted context goes upstream and how the API refuses a prompt as too long:
    # transparent compaction (proxy_compaction) and the too-long retry; None: neither applies.
    wire: Wire | None


_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 409: "invalid_request_error", 413: "request_too_large"}  # fmt: skip


def error_type(status: int) -> str:
    return _ERROR_TYPES.get(status, "invalid_request_error")


def anthropic_error(status: int, error_type: str, message: str) -> JsonResponse:
    """An error as Anthropic's API words it, so the caller's SDK raises its usual exception."""
    return JsonResponse({"type": "error", "error": {"type": error_type, "message": message}}, status=status)


def openai_error(status: int, error_type: str, message: str) -> JsonResponse:
    """An error as OpenAI's API words it."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    code = error_type if error_type != kind else None
    return JsonResponse({"error": {"message": message, "type": kind, "param": None, "code": code}}, status=status)


def anthropic_rate_limited(message: str) -> JsonResponse:
    return anthropic_error(429, "rate_limit_error", message)


def openai_rate_limited(message: str) -> JsonResponse:
    """OpenAI's own 429 shape, with a code of ctxweb's that tells it from the provider's limits."""
    error = {"message": message, "type": "rate_limit_error", "param": None, "code": "budget_exceeded"}
    return JsonResponse({"error": error}, status=429)


def _anthropic_reply(message: Any) -> dict[str, Any] | None:
    return message if isinstance(message, dict) and message.get("type") == "message" else None


def _event(name: str | None, data: dict[str, Any]) -> bytes:
    # After a blank line, which ends whatever event was cut.
    return b"\n\n" + (f"event: {name}\n".encode() if name else b"") + b"data: " + json.dumps(data).encode() + b"\n\n"


_BROKE_OFF = "ctxweb: the upstream API's stream broke off ({}); send the request again."

ANTHROPIC = Dialect(
    upstream_url=lambda: settings.CTX_PROXY_UPSTREAM_URL,
    refuse=anthropic_error,
    accumulator=MessageAccumulator,
    reply_of=_anthropic_reply,
    used_of=anthropic_used,
    recorded=conversation_of,
    broke_off=lambda why: _event(
        "error", {"type": "error", "error": {"type": "api_error", "message": _BROKE_OFF.format(why)}}
    ),
    own_key_header="x-api-key",
    project_key=True,
    rate_limited=anthropic_rate_limited,
    wire=ANTHROPIC_MESSAGES,
)

OPENAI = Dialect(
    upstream_url=lambda: settings.CTX_PROXY_OPENAI_URL,
    refuse=openai_error,
    accumulator=ChunkAccumulator,
    reply_of=completion_as_message,
    used_of=chat_used,
    recorded=chat_request_as_anthropic,
    broke_off=lambda why: _event(
        None, {"error": {"message": _BROKE_OFF.format(why), "type": "server_error", "param": None, "code": None}}
    ),
    own_key_header="Authorization: Bearer",
    project_key=False,
    rate_limited=openai_rate_limited,
    wire=OPENAI_CHAT,
)

RESPONSES = Dialect(
    upstream_url=lambda: settings.CTX_PROXY_OPENAI_URL,
    refuse=openai_error,
    accumulator=ResponseAccumulator,
    reply_of=response_as_message,
    used_of=responses_used,
    recorded=request_as_anthropic,
    broke_off=lambda why: _event(
        "error", {"type": "error", "code": "server_error", "message": _BROKE_OFF.format(why), "param": None}
    ),
    own_key_header="Authorization: Bearer",
    project_key=False,
    rate_limited=openai_rate_limited,
    wire=OPENAI_RESPONSES,
)
