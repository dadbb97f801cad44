"""A fake OpenAI Chat Completions server for tests (standard library only): a real HTTP server on
loopback that the real ``openai`` SDK talks to through ``base_url``.

    with FakeOpenAI() as server:
        server.queue_reply("Hello.")
        client = openai.OpenAI(api_key="test", base_url=f"{server.base_url}/v1", max_retries=0)

``POST …/v1/chat/completions`` needs ``Authorization: Bearer …`` (else 401) and a ``messages`` list
(else 400), and answers the next queued reply (FIFO; else ``DEFAULT_REPLY``): a ``chat.completion``,
or with ``"stream": true`` ``chat.completion.chunk`` events as the API sends them — the role first,
content in pieces, each tool call's id and name then its arguments in pieces, the finish reason, a
last chunk with ``usage`` and no choices when ``stream_options.include_usage`` is set, and
``data: [DONE]``. ``usage.prompt_tokens`` is ``count_tokens_for(body)``: ceil(bytes / 4) of the
canonical JSON of the messages and tools, plus 3 a message; ``completion_tokens`` ceil(bytes / 4) of
what the reply says. ``queue_error(status)`` answers an error in OpenAI's format instead;
``queue_stream_cut(n)`` drops the next stream's connection after n events; with
``set_context_window(n)``, a request whose ``prompt_tokens`` would pass n is refused as the API
refuses it (400, ``context_length_exceeded``, "This model's maximum context length is n tokens. …").
A reply queued with ``cached_tokens`` reports that much of the prompt (at most all of it) as read from
the cache (``usage.prompt_tokens_details.cached_tokens``), and ``service_tier`` as the tier it ran on.
``reset()`` makes it as new (one server shared by several tests, ``tests/clients/conftest.py``).
"""

from __future__ import annotations

import json
import math
import secrets
import socket
import threading
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes import openai_responses

DEFAULT_REPLY = "This is the default reply of the fake OpenAI server."
_PIECE = 12  # characters of content or arguments per chunk


def count_tokens_for(body: Mapping[str, Any]) -> int:
    messages = body.get("messages")
    data = json.dumps({"messages": messages, "tools": body.get("tools")}, sort_keys=True, separators=(",", ":"))
    return math.ceil(len(data.encode()) / 4) + 3 * (len(messages) if isinstance(messages, list) else 0)


class FakeOpenAI:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def reset(self) -> None:
        """Nothing queued, nothing recorded, no window: as new (a server shared by several tests)."""
        with self._lock:
            self._replies: list[dict[str, Any]] = []
            self._errors: list[tuple[int, str, str | None]] = []
            self._cuts: list[int] = []
            self.requests: list[dict[str, Any]] = []
            self.responses = openai_responses.ResponsesAPI()  # POST …/v1/responses (tests/fakes/openai_responses.py)
            self.context_window: int | None = None

    def queue_reply(self, text: str) -> None:
        self.queue_message(text)

    def queue_message(
        self,
        content: str | None,
        *,
        tool_calls: list[dict[str, Any]] | None = None,
        cached_tokens: int | None = None,
        service_tier: str | None = None,
    ) -> None:
        """A reply; ``tool_calls``: ``{"id", "name", "arguments"}`` (arguments: a JSON text)."""
        reply = {"content": content, "tool_calls": list(tool_calls or []), "cached_tokens": cached_tokens}
        with self._lock:
            self._replies.append({**reply, "service_tier": service_tier})

    def queue_stream_cut(self, after_chunks: int) -> None:
        """The next streamed answer drops the connection after ``after_chunks`` events."""
        with self._lock:
            self._cuts.append(after_chunks)

    def queue_error(
        self, status: int, message: str = "Injected by the fake OpenAI server", *, code: str | None = None
    ) -> None:
        with self._lock:
            self._errors.append((status, message, code))

    def set_context_window(self, tokens: int | None) -> None:
        """Refuse, from now on, a request whose prompt passes ``tokens`` (None: no limit)."""
        self.context_window = tokens

    def answer(self, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        """The completion for ``body`` (or a queued error, or the refusal of a prompt too long for the
        window), as the non-streamed answer."""
        prompt = count_tokens_for(body)
        with self._lock:
            if self._errors:
                status, said, code = self._errors.pop(0)
                kind = "invalid_request_error" if status == 400 else "server_error"
                return status, {"error": {"message": said, "type": kind, "param": None, "code": code}}
            if self.context_window is not None and prompt > self.context_window:
                refusal = (
                    f"This model's maximum context length is {self.context_window} tokens. However, your messages "
                    f"resulted in {prompt} tokens. Please reduce the length of the messages."
                )
                error = {"message": refusal, "type": "invalid_request_error", "param": "messages"}
                return 400, {"error": {**error, "code": "context_length_exceeded"}}
            reply = self._replies.pop(0) if self._replies else {"content": DEFAULT_REPLY, "tool_calls": []}
        calls = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in reply["tool_calls"]
        ]
        said = (reply["content"] or "") + "".join(c["arguments"] for c in reply["tool_calls"])
        completion = max(1, math.ceil(len(said.encode()) / 4))
        message: dict[str, Any] = {"role": "assistant", "content": reply["content"]}
        if calls:
            message["tool_calls"] = calls
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        if reply.get("cached_tokens") is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": min(reply["cached_tokens"], prompt)}
        answer = {
            "id": f"chatcmpl-{secrets.token_hex(8)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or "gpt-4o",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": usage,
        }
        if reply.get("service_tier"):
            answer["service_tier"] = reply["service_tier"]
        return 200, answer


def chunks(completion: Mapping[str, Any], *, include_usage: bool) -> list[dict[str, Any]]:
    """A completion as the ``chat.completion.chunk`` events that stream it."""
    head = {k: completion[k] for k in ("id", "created", "model", "service_tier") if k in completion}
    head["object"] = "chat.completion.chunk"
    choice = completion["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": ""})]
    text = message.get("content") or ""
    out += [chunk({"content": text[i : i + _PIECE]}) for i in range(0, len(text), _PIECE)]
    for index, call in enumerate(message.get("tool_calls") or []):
        opening = {"index": index, "id": call["id"], "type": "function"}
        out.append(chunk({"tool_calls": [opening | {"function": {"name": call["function"]["name"], "arguments": ""}}]}))
        arguments = call["function"]["arguments"]
        out += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments[i : i + _PIECE]}}]})
            for i in range(0, len(arguments), _PIECE)
        ]
    out.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        out.append({**head, "choices": [], "usage": completion["usage"]})
    return out


def _handler(server: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def setup(self) -> None:
            super().setup()
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def do_POST(self) -> None:
            try:
                self._post()
            except Exception as exc:  # a fake that fails answers as a server does, not by hanging up
                self._json(500, {"error": {"message": f"fake server error: {exc!r}"[:500], "type": "server_error"}})

        def _post(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            try:
                body = json.loads(raw)
            except (ValueError, RecursionError):
                body = None
            headers = {k.lower(): v for k, v in self.headers.items()}
            seen: dict[str, Any] = {"path": self.path, "headers": headers, "body": body}
            with server._lock:
                server.requests.append(seen)
            if openai_responses.is_responses_path(self.path):
                return openai_responses.serve(self, server.responses, headers, body)
            if not self.path.rstrip("/").endswith("/v1/chat/completions"):
                return self._json(404, {"error": {"message": "Not found", "type": "invalid_request_error"}})
            if not headers.get("authorization", "").lower().startswith("bearer "):
                return self._json(401, {"error": {"message": "No API key", "type": "invalid_request_error"}})
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                return self._json(
                    400, {"error": {"message": "'messages' is required", "type": "invalid_request_error"}}
                )
            status, completion = server.answer(body)
            seen["status"] = status
            if status != 200 or body.get("stream") is not True:
                return self._json(status, completion)
            options = body.get("stream_options")
            events = chunks(
                completion, include_usage=isinstance(options, dict) and options.get("include_usage") is True
            )
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.send_header("x-request-id", f"req_{secrets.token_hex(6)}")
            self.end_headers()
            with server._lock:
                cut = server._cuts.pop(0) if server._cuts else None
            for n, event in enumerate([*(json.dumps(e) for e in events), "[DONE]"]):
                if n == cut:  # the connection drops mid-stream
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                data = f"data: {event}\n\n".encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")

        def _json(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.send_header("x-request-id", f"req_{secrets.token_hex(6)}")
            self.end_headers()
            self.wfile.write(data)

    return Handler
