"""A fake Anthropic Messages API server for tests (standard library only).

A real HTTP server on loopback that the real ``anthropic`` SDK talks to through ``base_url``.
Nothing here ever reaches the network beyond 127.0.0.1.

In process::

    with FakeAnthropic() as server:
        server.queue_reply('{"objective": "..."}')
        client = anthropic.Anthropic(api_key="test", base_url=server.base_url, max_retries=0)
        client.messages.create(model="claude-haiku-4-5", max_tokens=100, messages=[...])
        server.requests[-1]["body"]

Out of process (e.g. for a Celery worker pointed at it with ANTHROPIC_BASE_URL)::

    python -m tests.fakes.anthropic_server --port 0     # first stdout line: http://127.0.0.1:PORT
    script("http://127.0.0.1:PORT", action="queue_error", status=529, times=3, retry_after_ms=1)
    fetch_requests("http://127.0.0.1:PORT")

or, from Python, ``with FakeAnthropicProcess() as proc: proc.script(...)``.

Endpoints (any path prefix kept from ``base_url`` is accepted; the query string is ignored):

* ``POST …/v1/messages`` and ``POST …/v1/messages/count_tokens``.
* ``POST …/_fake/script`` (JSON ``{"action": NAME, **kwargs}``, see ``SCRIPT_ACTIONS``) and
  ``GET …/_fake/requests`` (the recorded requests as a JSON list). Not recorded, no credentials.

What one API request goes through, in this order:

1. it is recorded (``server.requests``);
2. the configured delay (``set_delay``) is slept;
3. credentials: ``x-api-key`` or ``Authorization: Bearer`` must be present (and equal to
   ``api_key`` when the server was built with one) → else 401 ``authentication_error``;
4. the next scripted response for this endpoint, if any (``queue_error`` /
   ``queue_malformed_json_body``), is sent instead of the normal answer;
5. minimal validation like the real API → 400 ``invalid_request_error``, with what it checks of
   extended thinking and ``context_management`` (``anthropic_rules``: a tool loop's first assistant
   message starts with a thought when thinking is on, thoughts come back as signed, known edits);
6. the answer: ``{"input_tokens": N}`` for count_tokens; for messages a Message body whose content
   is the next ``queue_reply``/``queue_message`` entry (FIFO), else ``message_function(body)`` (a
   whole turn, ``tests/fakes/scripted_model.py`` plays a model with it) when set and not None, else
   ``reply_function(body)`` when set and not None, else the default reply.

Token counts (``usage.input_tokens`` and count_tokens) come from the count function, by default
``default_count_tokens``: take ``{"messages": …, "system": …, "tools": …}`` from the request body
(absent keys as ``null``), serialize it as canonical JSON (``sort_keys=True``,
``separators=(",", ":")``, ``ensure_ascii=False``, UTF-8), and answer
``ceil(len(bytes) / 4) + 3 * len(messages)``. Replace it with ``set_count_function(fn)``.
``usage.output_tokens`` is ``ceil(len(text.encode()) / 4)`` (at least 1) unless queued explicitly.

Streaming (``"stream": true``) answers the same message as server-sent events, in the order the
real API sends them: ``message_start`` (the message with empty content, ``stop_reason`` null and the
input usage, ``output_tokens`` 1), ``ping``, then per content block ``content_block_start``, its
deltas (``text_delta`` pieces of the text; ``input_json_delta`` pieces of a ``tool_use`` block's
input as JSON; ``thinking_delta`` pieces of a thought, then its ``signature_delta``) and
``content_block_stop``, then ``message_delta`` (``stop_reason``, ``stop_sequence`` and the final
``output_tokens``) and ``message_stop``; chunked, ``Content-Type: text/event-stream``.
Errors scripted with ``queue_error`` come before the stream as plain JSON answers, as the real API
sends them. ``queue_stream_error(after_events=N)`` sends an ``error`` event after N events and ends
the stream (the real API's mid-stream ``overloaded_error``); ``queue_stream_cut(after_events=N)``
drops the connection after N events, without ending the chunked body. ``set_event_interval(s)``
sleeps between events.

Context editing (``context_management.edits`` with ``clear_tool_uses_20250919``), as the API applies
it: when the request's input tokens pass the edit's ``trigger`` (default 100,000), the oldest tool
results (of tools not in ``exclude_tools``) but the newest ``keep`` tool uses (default 3) are
replaced by ``CLEARED_TOOL_RESULT`` before the "model" reads the request — ``usage.input_tokens`` is
the edited request's count — and the answer says so: ``context_management.applied_edits`` with
``cleared_tool_uses`` and ``cleared_input_tokens`` (top level; in a stream, on ``message_delta``).
``clear_thinking_20251015`` (and, with thinking on and no such edit, the API's default of keeping the
last turn's thoughts) removes older turns' thinking blocks first (``anthropic_rules.clear_thinking``).
The request is recorded as it came; ``server.edited`` holds what the model read.
``set_context_window(N)`` refuses a request the model would read as more than N tokens, as the API
refuses one over its model's window: 400, "prompt is too long: X tokens > N maximum".
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import os
import secrets
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

from tests.fakes.anthropic_rules import RuleBroken, check_thinking, clear_thinking, edits_of

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_REPLY",
    "ERROR_TYPES",
    "SCRIPT_ACTIONS",
    "FakeAnthropic",
    "FakeAnthropicProcess",
    "default_count_tokens",
    "error_type_for",
    "fetch_requests",
    "script",
    "stream_events",
]

DEFAULT_REPLY = "This is the default reply of the fake Anthropic server."
DEFAULT_MODEL = "claude-haiku-4-5"

#: HTTP status → ``error.type`` (the table in ANTHROPIC_WIRE.md, plus the SDK's names).
ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    409: "conflict_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}

#: ``set_message_function``'s callable: a request body in, a whole turn (or None) out.
MessageFunction = Callable[[Mapping[str, Any]], "Mapping[str, Any] | None"]

_ENDPOINTS = ("messages", "count_tokens")
_ENDPOINT_ALIASES = {
    "messages": "messages",
    "/v1/messages": "messages",
    "v1/messages": "messages",
    "count_tokens": "count_tokens",
    "/v1/messages/count_tokens": "count_tokens",
    "v1/messages/count_tokens": "count_tokens",
}
_ROLES = ("user", "assistant")
_COUNT_TOKENS_FORBIDDEN = ("max_tokens", "stream", "stop_sequences")


def error_type_for(status: int) -> str:
    """The ``error.type`` the real API uses for an HTTP status (4xx fallback: invalid_request_error)."""
    if status in ERROR_TYPES:
        return ERROR_TYPES[status]
    return "api_error" if status >= 500 else "invalid_request_error"


def default_count_tokens(body: Mapping[str, Any]) -> int:
    """Deterministic stand-in for the real tokenizer; see the module docstring."""
    messages = body.get("messages")
    canonical = {"messages": messages, "system": body.get("system"), "tools": body.get("tools")}
    # (surrogatepass: a lone surrogate a client sent as an escape counts as its three bytes)
    data = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8", "surrogatepass"
    )
    n_messages = len(messages) if isinstance(messages, list) else 0
    return math.ceil(len(data) / 4) + 3 * n_messages


CLEARED_TOOL_RESULT = "[tool result cleared by context editing]"


def clear_tool_uses(body: Mapping[str, Any], count: Callable[[Mapping[str, Any]], int]) -> tuple[Any, dict | None]:
    """The request as the model reads it after its ``clear_tool_uses`` edit, and the applied edit (None
    when the edit did not trigger or is not asked for)."""
    management = body.get("context_management")
    edits = management.get("edits") if isinstance(management, dict) else None
    edit = next(
        (e for e in edits or [] if isinstance(e, dict) and str(e.get("type", "")).startswith("clear_tool_uses")), None
    )
    messages = body.get("messages")
    if edit is None or not isinstance(messages, list):
        return body, None
    trigger = (edit.get("trigger") or {}).get("value", 100_000)
    keep = (edit.get("keep") or {}).get("value", 3)
    excluded = set(edit.get("exclude_tools") or [])
    before = count(body)
    if before <= trigger:
        return body, None
    names = {
        b.get("id"): b.get("name")
        for m in messages
        if isinstance(m, dict) and isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_use"
    }
    results = [
        b.get("tool_use_id")
        for m in messages
        if isinstance(m, dict) and isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result" and names.get(b.get("tool_use_id")) not in excluded
    ]
    clearing = set(results[: max(0, len(results) - keep)])
    if not clearing:
        return body, None

    def edited(block: Any) -> Any:
        if isinstance(block, dict) and block.get("type") == "tool_result" and block.get("tool_use_id") in clearing:
            return {**block, "content": CLEARED_TOOL_RESULT}
        return block

    seen = {
        **body,
        "messages": [
            {**m, "content": [edited(b) for b in m["content"]]}
            if isinstance(m, dict) and isinstance(m.get("content"), list)
            else m
            for m in messages
        ],
    }
    applied = {"type": edit["type"], "cleared_tool_uses": len(clearing), "cleared_input_tokens": before - count(seen)}
    return seen, applied


def _output_tokens(text: str) -> int:
    return max(1, math.ceil(len(text.encode("utf-8")) / 4))


def _normalize_endpoint(endpoint: str | None) -> str | None:
    if endpoint is None:
        return None
    try:
        return _ENDPOINT_ALIASES[endpoint]
    except KeyError:
        raise ValueError(f"endpoint must be None, 'messages' or 'count_tokens', not {endpoint!r}") from None


def _new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(12)


class _ApiError(Exception):
    def __init__(self, status: int, message: str, error_type: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.error_type = error_type or error_type_for(status)


def _validate(endpoint: str, body: Any) -> None:
    """Minimal request validation, like the real API; raises _ApiError(400)."""
    if not isinstance(body, dict):
        raise _ApiError(400, "Request body must be a JSON object.")
    model = body.get("model")
    if model is None:
        raise _ApiError(400, "model: Field required")
    if not isinstance(model, str) or not model:
        raise _ApiError(400, "model: Input should be a valid string")
    if "messages" not in body:
        raise _ApiError(400, "messages: Field required")
    messages = body["messages"]
    if not isinstance(messages, list):
        raise _ApiError(400, "messages: Input should be a valid list")
    if not messages:
        raise _ApiError(400, "messages: at least one message is required")
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict):
            raise _ApiError(400, f"messages.{i}: Input should be a valid dictionary")
        if msg.get("role") not in _ROLES:
            raise _ApiError(400, f"messages.{i}.role: Input should be 'user' or 'assistant'")
        if "content" not in msg:
            raise _ApiError(400, f"messages.{i}.content: Field required")
        content = msg["content"]
        if isinstance(content, list):
            for j, block in enumerate(content):
                if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                    raise _ApiError(400, f"messages.{i}.content.{j}: block must be an object with a string 'type'")
        elif not isinstance(content, str):
            raise _ApiError(400, f"messages.{i}.content: Input should be a valid string or list")
    system = body.get("system")
    if system is not None and not isinstance(system, str | list):
        raise _ApiError(400, "system: Input should be a valid string or list")
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise _ApiError(400, "tools: Input should be a valid list")
    if endpoint == "messages":
        if "max_tokens" not in body:
            raise _ApiError(400, "max_tokens: Field required")
        max_tokens = body["max_tokens"]
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
            raise _ApiError(400, "max_tokens: Input should be a valid integer")
        if max_tokens < 1:
            raise _ApiError(400, "max_tokens: Input should be greater than or equal to 1")
        if "stream" in body and not isinstance(body["stream"], bool):
            raise _ApiError(400, "stream: Input should be a valid boolean")
    else:
        for key in _COUNT_TOKENS_FORBIDDEN:
            if key in body:
                raise _ApiError(400, f"{key}: Extra inputs are not permitted")


@dataclass
class _Scripted:
    kind: str  # "error" | "malformed"
    endpoint: str | None
    times: int
    status: int = 200
    message: str | None = None
    error_type: str | None = None
    retry_after_ms: float | None = None
    should_retry: bool | None = None


@dataclass
class _Reply:
    content: list[dict[str, Any]]
    stop_reason: str = "end_turn"
    input_tokens: int | None = None
    output_tokens: int | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    model: str | None = None


@dataclass
class _StreamFault:
    kind: str  # "error": an error event, then the end of the stream; "cut": the connection dropped
    after_events: int
    error_type: str = "overloaded_error"
    message: str = "Overloaded"


@dataclass
class _Response:
    status: int
    body: bytes
    headers: dict[str, str]
    # A streamed answer: the (event name, data) pairs to send instead of ``body``, and how it ends.
    events: list[tuple[str, dict[str, Any]]] | None = None
    fault: _StreamFault | None = None
    event_interval: float = 0.0


class FakeAnthropic:
    """The fake server. Thread-safe; start with ``start()`` or ``with FakeAnthropic() as server:``.

    ``api_key``: when given, requests must carry exactly this key (else 401); when None any
    non-empty key is accepted. ``default_reply``: the text answered when no reply is queued.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        api_key: str | None = None,
        default_reply: str = DEFAULT_REPLY,
        verbose: bool = False,
    ) -> None:
        self._lock = threading.Lock()
        self._api_key = api_key
        self._initial_default_reply = default_reply
        self._verbose = verbose
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._httpd = ThreadingHTTPServer((host, port), _make_handler(self))
        self._httpd.daemon_threads = True
        self._reset_state()

    # ----------------------------------------------------------------- lifecycle
    @property
    def host(self) -> str:
        return cast(str, self._httpd.server_address[0])  # an AF_INET server: (host, port)

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (no trailing slash); pass it to ``anthropic.Anthropic(base_url=…)``."""
        return f"http://{self.host}:{self.port}"

    def start(self) -> FakeAnthropic:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-anthropic", daemon=True
            )
            self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in the calling thread until ``stop()`` (used by the script mode)."""
        self._httpd.serve_forever(poll_interval=0.1)

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping in a delay
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ----------------------------------------------------------------- scripting
    def _reset_state(self) -> None:
        self._requests: list[dict[str, Any]] = []
        self._edited: list[Any] = []  # requests as the model read them after context editing
        self._replies: list[_Reply] = []
        self._scripted: list[_Scripted] = []
        self._delays: dict[str | None, float] = {}
        self._stream_faults: list[_StreamFault] = []
        self._event_interval = 0.0
        self._count_function: Callable[[Mapping[str, Any]], int] = default_count_tokens
        self._context_window: int | None = None
        self._reply_function: Callable[[Mapping[str, Any]], str | None] | None = None
        self._message_function: MessageFunction | None = None
        self._default_reply = self._initial_default_reply

    def reset(self) -> None:
        """Forget recorded requests, queued replies/errors, delays, count and reply functions, default reply,
        context window."""
        with self._lock:
            self._reset_state()

    @property
    def requests(self) -> list[dict[str, Any]]:
        """A copy of the recorded API requests, oldest first. Each is a dict with keys ``method``,
        ``path`` (without query), ``query``, ``endpoint`` ("messages" / "count_tokens" / None),
        ``headers`` (lowercased keys), ``body`` (parsed JSON or None), ``raw_body`` (str),
        ``status`` (the status answered; None while in flight), ``request_id``, ``time``, and for an
        answered message its ``usage``."""
        with self._lock:
            return copy.deepcopy(self._requests)

    @property
    def edited(self) -> list[Any]:
        """The requests context editing changed, as the model read them (in the order they came)."""
        with self._lock:
            return copy.deepcopy(self._edited)

    def _seen(self, body: Any) -> None:
        with self._lock:
            self._edited.append(body)

    def requests_for(self, endpoint: str) -> list[dict[str, Any]]:
        """Recorded requests of one endpoint ("messages" or "count_tokens")."""
        name = _normalize_endpoint(endpoint)
        return [r for r in self.requests if r["endpoint"] == name]

    def queue_reply(
        self,
        text: str,
        *,
        stop_reason: str = "end_turn",
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        usage: Mapping[str, Any] | None = None,
        model: str | None = None,
    ) -> None:
        """Queue one text reply for ``/v1/messages`` (FIFO). ``usage`` entries (e.g.
        ``cache_read_input_tokens``) are merged into the answered usage; ``input_tokens`` /
        ``output_tokens`` override the computed ones; ``model`` overrides the echoed model."""
        self.queue_message(
            [{"type": "text", "text": text}],
            stop_reason=stop_reason,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            usage=usage,
            model=model,
        )

    def queue_message(
        self,
        content: list[dict[str, Any]],
        *,
        stop_reason: str = "end_turn",
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        usage: Mapping[str, Any] | None = None,
        model: str | None = None,
    ) -> None:
        """Queue one reply with arbitrary content blocks (e.g. ``tool_use``) for ``/v1/messages``."""
        reply = _Reply(
            content=copy.deepcopy(list(content)),
            stop_reason=stop_reason,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            usage=dict(usage or {}),
            model=model,
        )
        with self._lock:
            self._replies.append(reply)

    def queue_error(
        self,
        status: int,
        *,
        endpoint: str | None = None,
        retry_after_ms: float | None = None,
        times: int = 1,
        should_retry: bool | None = None,
        message: str | None = None,
        error_type: str | None = None,
    ) -> None:
        """Answer the next ``times`` requests to ``endpoint`` (None: either endpoint) with an error.

        The body is ``{"type":"error","error":{"type":T,"message":M},"request_id":…}`` with T from
        ``ERROR_TYPES`` unless ``error_type`` is given. ``retry_after_ms`` sends a
        ``retry-after-ms`` header; ``should_retry`` sends ``x-should-retry: true|false``."""
        if times < 1:
            raise ValueError("times must be >= 1")
        if not 400 <= int(status) <= 599:
            raise ValueError("status must be a 4xx or 5xx code")
        entry = _Scripted(
            kind="error",
            endpoint=_normalize_endpoint(endpoint),
            times=int(times),
            status=int(status),
            message=message,
            error_type=error_type,
            retry_after_ms=retry_after_ms,
            should_retry=should_retry,
        )
        with self._lock:
            self._scripted.append(entry)

    def queue_malformed_json_body(self, *, endpoint: str | None = None, times: int = 1) -> None:
        """Answer the next ``times`` requests to ``endpoint`` with a 200 whose body is not valid JSON.
        (For a valid Message whose *text* is not JSON, just ``queue_reply("not json")``.)"""
        if times < 1:
            raise ValueError("times must be >= 1")
        entry = _Scripted(kind="malformed", endpoint=_normalize_endpoint(endpoint), times=int(times))
        with self._lock:
            self._scripted.append(entry)

    queue_malformed = queue_malformed_json_body

    def queue_stream_error(
        self, *, after_events: int = 3, error_type: str = "overloaded_error", message: str = "Overloaded"
    ) -> None:
        """The next streamed answer sends an ``error`` event after ``after_events`` events, then ends."""
        with self._lock:
            self._stream_faults.append(_StreamFault("error", int(after_events), error_type, message))

    def queue_stream_cut(self, *, after_events: int = 3) -> None:
        """The next streamed answer drops the connection after ``after_events`` events."""
        with self._lock:
            self._stream_faults.append(_StreamFault("cut", int(after_events)))

    def set_event_interval(self, seconds: float) -> None:
        """Sleep ``seconds`` between the events of a streamed answer (0: none)."""
        with self._lock:
            self._event_interval = float(seconds)

    def set_delay(self, seconds: float, endpoint: str | None = None) -> None:
        """Sleep ``seconds`` before answering each request to ``endpoint`` (None: every endpoint
        without an endpoint-specific delay). 0 removes it."""
        name = _normalize_endpoint(endpoint)
        with self._lock:
            if seconds:
                self._delays[name] = float(seconds)
            else:
                self._delays.pop(name, None)

    def set_count_function(self, fn: Callable[[Mapping[str, Any]], int] | None) -> None:
        """``fn(body) -> int`` computes count_tokens and ``usage.input_tokens``; None restores the default."""
        with self._lock:
            self._count_function = fn or default_count_tokens

    def set_context_window(self, tokens: int | None) -> None:
        """Refuse a /v1/messages request whose input (as the model reads it, after context editing) is
        over ``tokens``, as the API refuses one longer than its model's window; None: never."""
        with self._lock:
            self._context_window = None if tokens is None else int(tokens)

    def set_reply_function(self, fn: Callable[[Mapping[str, Any]], str | None] | None) -> None:
        """``fn(body) -> text | None`` answers /v1/messages when no reply is queued (None: default reply)."""
        with self._lock:
            self._reply_function = fn

    def set_message_function(self, fn: MessageFunction | None) -> None:
        """``fn(body) -> {"content": [blocks], "stop_reason": …} | None`` answers /v1/messages with a whole
        turn (thinking, parallel tool uses …) when no reply is queued; None falls through to the reply
        function. ``stop_reason`` defaults to ``tool_use`` when the content has one, else ``end_turn``."""
        with self._lock:
            self._message_function = fn

    def set_default_reply(self, text: str) -> None:
        with self._lock:
            self._default_reply = text

    def count_tokens_for(self, body: Mapping[str, Any]) -> int:
        """What the server would answer for ``body`` with the current count function."""
        with self._lock:
            fn = self._count_function
        return int(fn(body))

    def pending(self) -> dict[str, int]:
        """How many queued replies and scripted responses (errors + malformed, counting ``times``) remain."""
        with self._lock:
            return {"replies": len(self._replies), "scripted": sum(s.times for s in self._scripted)}

    # ----------------------------------------------------------------- handling
    def _log(self, text: str) -> None:
        if self._verbose:
            print(f"[fake-anthropic] {text}", file=sys.stderr, flush=True)

    def _record(self, record: dict[str, Any]) -> int:
        with self._lock:
            self._requests.append(record)
            return len(self._requests) - 1

    def _set_status(self, record: dict[str, Any], status: int) -> None:
        with self._lock:
            record["status"] = status

    def _delay_for(self, endpoint: str | None) -> float:
        with self._lock:
            if endpoint in self._delays:
                return self._delays[endpoint]
            return self._delays.get(None, 0.0)

    def _pop_scripted(self, endpoint: str) -> _Scripted | None:
        with self._lock:
            for i, entry in enumerate(self._scripted):
                if entry.endpoint is None or entry.endpoint == endpoint:
                    entry.times -= 1
                    if entry.times <= 0:
                        del self._scripted[i]
                    return copy.copy(entry)
        return None

    def _check_auth(self, headers: Mapping[str, str]) -> None:
        key = headers.get("x-api-key", "").strip()
        auth = headers.get("authorization", "").strip()
        if not key and auth[:7].lower() == "bearer ":
            key = auth[7:].strip()
        if not key:
            raise _ApiError(401, "x-api-key header is required")
        if self._api_key is not None and key != self._api_key:
            raise _ApiError(401, "invalid x-api-key")

    def _handle_api(
        self,
        endpoint: str,
        headers: Mapping[str, str],
        body: Any,
        parse_error: str | None,
        record: dict[str, Any] | None = None,
    ) -> _Response:
        delay = self._delay_for(endpoint)
        if delay > 0:
            self._stopping.wait(delay)
        self._check_auth(headers)
        scripted = self._pop_scripted(endpoint)
        if scripted is not None:
            if scripted.kind == "malformed":
                return _Response(200, b'{"id": "msg_broken", "type": "message", "content": [', {})
            extra: dict[str, str] = {}
            if scripted.retry_after_ms is not None:
                extra["retry-after-ms"] = str(scripted.retry_after_ms)
            if scripted.should_retry is not None:
                extra["x-should-retry"] = "true" if scripted.should_retry else "false"
            message = scripted.message or f"Injected {scripted.status} from the fake Anthropic server"
            return _error_response(scripted.status, message, scripted.error_type, extra)
        if parse_error is not None:
            raise _ApiError(400, parse_error)
        _validate(endpoint, body)
        try:
            check_thinking(body)
            edits = edits_of(body)
        except RuleBroken as exc:
            raise _ApiError(400, str(exc)) from exc
        with self._lock:
            count_fn = self._count_function
            window = self._context_window
        try:
            applied: list[dict[str, Any]] = []
            seen = body
            if endpoint == "messages":  # the edits, in the order the API applies them: thinking first
                seen, thinking_edit = clear_thinking(body, edits)
                if thinking_edit is not None:
                    applied.append({**thinking_edit, "cleared_input_tokens": count_fn(body) - count_fn(seen)})
                seen, tools_edit = clear_tool_uses(seen, count_fn)
                applied += [tools_edit] if tools_edit is not None else []
            input_tokens = int(count_fn(seen))
        except Exception as exc:  # a broken test count function should be visible, not hang the client
            raise _ApiError(500, f"count function failed: {exc!r}") from exc
        if seen is not body:
            self._seen(seen)
        if endpoint == "count_tokens":
            return _json_response(200, {"input_tokens": input_tokens})
        if window is not None and input_tokens > window:  # as the model would read it, after the edits
            raise _ApiError(400, f"prompt is too long: {input_tokens} tokens > {window} maximum")
        with self._lock:  # (a request refused above takes no queued reply)
            reply = self._replies.pop(0) if self._replies else None
            reply_fn = self._reply_function
            message_fn = self._message_function
            default_reply = self._default_reply
        turn = message_fn(body) if reply is None and message_fn is not None else None
        if turn is not None:
            content = list(turn["content"])
            uses_tool = any(b.get("type") == "tool_use" for b in content)
            reply = _Reply(
                content=content, stop_reason=turn.get("stop_reason") or ("tool_use" if uses_tool else "end_turn")
            )
        if reply is None:
            text = reply_fn(body) if reply_fn is not None else None
            reply = _Reply(content=[{"type": "text", "text": default_reply if text is None else text}])
        # output tokens: the text blocks, plus the JSON of any other blocks (tool_use …)
        output_text = "".join(b.get("text", "") for b in reply.content if b.get("type") == "text")
        if any(b.get("type") != "text" for b in reply.content):
            output_text += json.dumps([b for b in reply.content if b.get("type") != "text"])
        usage: dict[str, Any] = {
            "input_tokens": input_tokens if reply.input_tokens is None else reply.input_tokens,
            "output_tokens": _output_tokens(output_text) if reply.output_tokens is None else reply.output_tokens,
        }
        usage.update(reply.usage)
        if record is not None:  # what the answer said it counted, for tests comparing with it
            with self._lock:
                record["usage"] = dict(usage)
        answer: dict[str, Any] = {
            "id": _new_id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": reply.model or body.get("model") or DEFAULT_MODEL,
            "content": reply.content,
            "stop_reason": reply.stop_reason,
            "stop_sequence": None,
            "usage": usage,
        }
        if applied:
            answer["context_management"] = {"applied_edits": applied}
        if body.get("stream") is True:
            with self._lock:
                fault = self._stream_faults.pop(0) if self._stream_faults else None
                interval = self._event_interval
            return _Response(200, b"", {}, events=stream_events(answer), fault=fault, event_interval=interval)
        return _json_response(200, answer)

    def _handle_script(self, body: Any) -> _Response:
        if not isinstance(body, dict) or not isinstance(body.get("action"), str):
            raise _ApiError(400, 'body must be a JSON object with a string "action"')
        kwargs = dict(body)
        action = kwargs.pop("action")
        if action not in SCRIPT_ACTIONS:
            raise _ApiError(400, f"unknown action {action!r}; known: {sorted(SCRIPT_ACTIONS)}")
        try:
            SCRIPT_ACTIONS[action](self, **kwargs)
        except (TypeError, ValueError) as exc:
            raise _ApiError(400, f"{action}: {exc}") from exc
        return _json_response(200, {"ok": True, "action": action, "pending": self.pending()})


def _set_fixed_count(server: FakeAnthropic, input_tokens: int | None = None) -> None:
    if input_tokens is None:
        server.set_count_function(None)
    else:
        value = int(input_tokens)
        server.set_count_function(lambda body: value)


#: Actions of ``POST /_fake/script``: ``{"action": NAME, **kwargs}`` calls the method with kwargs.
SCRIPT_ACTIONS: dict[str, Callable[..., None]] = {
    "queue_reply": FakeAnthropic.queue_reply,
    "queue_message": FakeAnthropic.queue_message,
    "queue_error": FakeAnthropic.queue_error,
    "queue_malformed_json_body": FakeAnthropic.queue_malformed_json_body,
    "queue_malformed": FakeAnthropic.queue_malformed_json_body,
    "set_delay": FakeAnthropic.set_delay,
    "set_default_reply": FakeAnthropic.set_default_reply,
    "queue_stream_error": FakeAnthropic.queue_stream_error,
    "queue_stream_cut": FakeAnthropic.queue_stream_cut,
    "set_event_interval": FakeAnthropic.set_event_interval,
    "set_context_window": FakeAnthropic.set_context_window,
    "set_fixed_count": _set_fixed_count,  # {"input_tokens": N} or {"input_tokens": null} for the default
    "reset": FakeAnthropic.reset,
}


_TEXT_PIECE = 24  # characters per text_delta
_JSON_PIECE = 16  # characters per input_json_delta


def stream_events(message: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``message`` (a whole Message body) as the server-sent events that stream it."""
    usage = dict(message["usage"])
    start_usage = {**{k: v for k, v in usage.items() if k != "output_tokens"}, "output_tokens": 1}
    started = {**message, "content": [], "stop_reason": None, "stop_sequence": None, "usage": start_usage}
    started.pop("context_management", None)
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": started}),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(message["content"]):
        if block.get("type") == "tool_use":
            opening = {**block, "input": {}}
            raw = json.dumps(block.get("input", {}))
            deltas = [
                {"type": "input_json_delta", "partial_json": raw[i : i + _JSON_PIECE]}
                for i in range(0, len(raw), _JSON_PIECE)
            ]
        elif block.get("type") == "text":
            opening = {**block, "text": ""}
            text = block.get("text", "")
            deltas = [
                {"type": "text_delta", "text": text[i : i + _TEXT_PIECE]} for i in range(0, len(text), _TEXT_PIECE)
            ]
        elif block.get("type") == "thinking":  # the API streams the thought, then its signature
            opening = {**block, "thinking": "", "signature": ""}
            thought = block.get("thinking", "")
            deltas = [
                {"type": "thinking_delta", "thinking": thought[i : i + _TEXT_PIECE]}
                for i in range(0, len(thought), _TEXT_PIECE)
            ]
            deltas.append({"type": "signature_delta", "signature": block.get("signature", "")})
        else:  # a block the fake has no delta for (redacted thinking, compaction …) arrives whole
            opening, deltas = dict(block), []
        events.append(
            ("content_block_start", {"type": "content_block_start", "index": index, "content_block": opening})
        )
        events += [("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": message.get("stop_sequence")}
    ending: dict[str, Any] = {"type": "message_delta", "delta": delta}
    ending["usage"] = {"output_tokens": usage["output_tokens"]}
    if "context_management" in message:
        ending["context_management"] = message["context_management"]
    events.append(("message_delta", ending))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def _json_response(status: int, payload: Any, headers: Mapping[str, str] | None = None) -> _Response:
    return _Response(status, json.dumps(payload).encode("utf-8"), dict(headers or {}))


def _error_response(
    status: int, message: str, error_type: str | None = None, headers: Mapping[str, str] | None = None
) -> _Response:
    payload = {"type": "error", "error": {"type": error_type or error_type_for(status), "message": message}}
    return _json_response(status, payload, headers)  # request_id is added when sending


def _make_handler(server: FakeAnthropic) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "FakeAnthropic/1.0"

        def log_message(self, format: str, *args: Any) -> None:
            server._log(format % args)

        def setup(self) -> None:
            super().setup()
            # As a real API server: each event leaves at once (Nagle's algorithm held a small write
            # back until the client acknowledged the one before, 40 ms later with delayed ACKs).
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def _read_body(self) -> bytes:
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                chunks: list[bytes] = []
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass
                        return b"".join(chunks)
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length > 0 else b""

        def _send_stream(self, response: _Response, request_id: str) -> None:
            events, fault = response.events or [], response.fault
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream; charset=utf-8")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("request-id", request_id)
                self.end_headers()
                for n, (name, data) in enumerate(events):
                    if fault is not None and n == fault.after_events:
                        if fault.kind == "cut":  # no last chunk: the client sees the body end early
                            self.close_connection = True
                            self.wfile.flush()
                            self.connection.shutdown(socket.SHUT_RDWR)
                            return
                        error = {"type": "error", "error": {"type": fault.error_type, "message": fault.message}}
                        self._chunk(f"event: error\ndata: {json.dumps(error)}\n\n".encode())
                        break
                    if n and response.event_interval:
                        server._stopping.wait(response.event_interval)
                    self._chunk(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
                self.close_connection = True

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _send(self, response: _Response, request_id: str) -> None:
            if response.events is not None:
                self._send_stream(response, request_id)
                return
            body = response.body
            if response.status >= 400 and body.startswith(b'{"type": "error"'):
                payload = json.loads(body)
                payload["request_id"] = request_id
                body = json.dumps(payload).encode("utf-8")
            try:
                self.send_response(response.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("request-id", request_id)
                for name, value in response.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
                self.close_connection = True  # the client gave up (e.g. its timeout); nothing to do

        def _dispatch(self, method: str) -> None:
            request_id = _new_id("req_")
            split = urlsplit(self.path)
            path = split.path.rstrip("/") or "/"
            raw = self._read_body() if method == "POST" else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            body: Any = None
            parse_error: str | None = None
            if raw:
                try:
                    body = json.loads(raw)
                except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # (nested too deep to read)
                    parse_error = f"Request body is not valid JSON: {exc}"
            elif method == "POST":
                parse_error = "Request body is empty; expected a JSON object."

            if path.endswith("/_fake/requests") and method == "GET":
                self._send(_json_response(200, server.requests), request_id)
                return
            if path.endswith("/_fake/script") and method == "POST":
                try:
                    if parse_error is not None:
                        raise _ApiError(400, parse_error)
                    response = server._handle_script(body)
                except _ApiError as err:
                    response = _error_response(err.status, err.message, err.error_type)
                self._send(response, request_id)
                return

            endpoint: str | None = None
            if method == "POST" and path.endswith("/v1/messages/count_tokens"):
                endpoint = "count_tokens"
            elif method == "POST" and path.endswith("/v1/messages"):
                endpoint = "messages"
            record = {
                "method": method,
                "path": split.path,
                "query": split.query,
                "endpoint": endpoint,
                "headers": headers,
                "body": body,
                "raw_body": raw.decode("utf-8", errors="replace"),
                "status": None,
                "request_id": request_id,
                "time": time.time(),
            }
            server._record(record)
            try:
                if endpoint is None:
                    raise _ApiError(404, f"Not found: {method} {split.path}")
                response = server._handle_api(endpoint, headers, body, parse_error, record)
            except _ApiError as err:
                response = _error_response(err.status, err.message, err.error_type)
            except Exception as exc:  # pragma: no cover - a bug in the fake itself
                response = _error_response(500, f"fake server error: {exc!r}")
            server._set_status(record, response.status)
            self._send(response, request_id)

        def do_POST(self) -> None:
            self._dispatch("POST")

        def do_GET(self) -> None:
            self._dispatch("GET")

    return Handler


# --------------------------------------------------------------------- out-of-process helpers
def script(base_url: str, timeout: float = 10.0, **action: Any) -> dict[str, Any]:
    """Program a fake server (in or out of process): ``script(url, action="queue_reply", text="hi")``.

    Raises ``RuntimeError`` with the server's message when the action is refused."""
    request = urllib.request.Request(
        base_url.rstrip("/") + "/_fake/script",
        data=json.dumps(action).encode("utf-8"),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as err:
        raise RuntimeError(f"fake server refused {action!r}: {err.read().decode('utf-8', 'replace')}") from err


def fetch_requests(base_url: str, timeout: float = 10.0) -> list[dict[str, Any]]:
    """The requests a fake server recorded (``GET /_fake/requests``)."""
    with urllib.request.urlopen(base_url.rstrip("/") + "/_fake/requests", timeout=timeout) as response:
        return json.loads(response.read())


_PROJECT_ROOT = Path(__file__).resolve().parents[2]


class FakeAnthropicProcess:
    """Runs ``python -m tests.fakes.anthropic_server`` as a subprocess (for other processes such as a
    Celery worker): ``with FakeAnthropicProcess() as proc: env["ANTHROPIC_BASE_URL"] = proc.base_url``."""

    def __init__(
        self,
        port: int = 0,
        *,
        api_key: str | None = None,
        python: str | None = None,
        startup_timeout: float = 15.0,
        text_piece: int = _TEXT_PIECE,
    ) -> None:
        self.port_requested = port
        self.text_piece = text_piece
        self.api_key = api_key
        self.python = python or sys.executable
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen[str] | None = None
        self.base_url = ""

    def start(self) -> FakeAnthropicProcess:
        cmd = [self.python, "-m", "tests.fakes.anthropic_server", "--port", str(self.port_requested)]
        cmd += ["--text-piece", str(self.text_piece)]
        if self.api_key is not None:
            cmd += ["--api-key", self.api_key]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
        env["PYTHONUNBUFFERED"] = "1"
        self.process = subprocess.Popen(cmd, cwd=_PROJECT_ROOT, env=env, stdout=subprocess.PIPE, text=True)
        self.base_url = read_base_url(self.process, self.startup_timeout)
        return self

    def script(self, **action: Any) -> dict[str, Any]:
        return script(self.base_url, **action)

    def requests(self) -> list[dict[str, Any]]:
        return fetch_requests(self.base_url)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
            if self.process.stdout is not None:
                self.process.stdout.close()
            self.process = None

    def __enter__(self) -> FakeAnthropicProcess:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def read_base_url(process: subprocess.Popen[str], timeout: float = 15.0) -> str:
    """Read the base URL the script prints on its first stdout line (kills the process on failure)."""
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        ready = selector.select(timeout)
    line = process.stdout.readline().strip() if ready else ""
    if not line.startswith("http://"):
        process.kill()
        process.wait(timeout=5)
        raise RuntimeError(f"fake Anthropic server did not start (first line: {line!r}, rc={process.returncode})")
    return line


def main(argv: list[str] | None = None) -> int:
    global _TEXT_PIECE  # --text-piece: the process streams with it
    parser = argparse.ArgumentParser(description="Fake Anthropic API server for tests (loopback only).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")
    parser.add_argument("--api-key", default=None, help="require exactly this key (default: any non-empty key)")
    parser.add_argument("--default-reply", default=DEFAULT_REPLY)
    parser.add_argument("--verbose", action="store_true", help="log requests to stderr")
    parser.add_argument("--text-piece", type=int, default=_TEXT_PIECE, help="characters per streamed text_delta")
    args = parser.parse_args(argv)
    _TEXT_PIECE = max(1, args.text_piece)

    server = FakeAnthropic(
        args.host, args.port, api_key=args.api_key, default_reply=args.default_reply, verbose=args.verbose
    )

    def _terminate(signum: int, frame: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, _terminate)
    print(server.base_url, flush=True)
    with contextlib.suppress(KeyboardInterrupt, SystemExit):
        server.serve_forever()
    server._stopping.set()
    server._httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
