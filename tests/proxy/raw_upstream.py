"""A raw upstream for the OpenAI proxy's review tests: it answers exactly the bytes queued (odd
streams, odd ids), piece by piece."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CALLER_KEY = "sk-callers-own-openai-key-0123456789"


class Raw:
    """Queue (status, content_type, [pieces]) answers; each piece is written and flushed alone."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.queue: list[tuple[int, str, list[bytes]]] = []
        self.requests: list[dict[str, Any]] = []
        self.interval = 0.002  # seconds between two pieces of an answer
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Raw:
        self.thread.start()
        return self

    def __exit__(self, *a: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def json(self, body: Any, status: int = 200) -> None:
        self.queue.append((status, "application/json", [json.dumps(body).encode()]))

    def sse(self, pieces: list[bytes], status: int = 200) -> None:
        self.queue.append((status, "text/event-stream", pieces))

    def events(self, events: list[Any], *, done: bool = True, sep: bytes = b"\n\n", prefix: bytes = b"data: ") -> None:
        pieces = [prefix + (e if isinstance(e, bytes) else json.dumps(e).encode()) + sep for e in events]
        if done:
            pieces.append(prefix + b"[DONE]" + sep)
        self.sse(pieces)


def _handler(raw: Raw) -> type[BaseHTTPRequestHandler]:
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a: Any) -> None:
            pass

        def setup(self) -> None:
            super().setup()
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def do_POST(self) -> None:
            data = self.rfile.read(int(self.headers.get("content-length") or 0))
            try:
                body = json.loads(data)
            except ValueError:
                body = None
            with raw.lock:
                raw.requests.append(
                    {"headers": {k.lower(): v for k, v in self.headers.items()}, "body": body, "raw": data}
                )
                status, ctype, pieces = (
                    raw.queue.pop(0)
                    if raw.queue
                    else (200, "application/json", [json.dumps(completion("default")).encode()])
                )
            self.send_response(status)
            ctype, *more = ctype.split("|")
            for line in more:
                k, v = line.split(":", 1)
                self.send_header(k, v.strip())
            self.send_header("content-type", ctype)
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for p in pieces:
                self.wfile.write(f"{len(p):x}\r\n".encode() + p + b"\r\n")
                self.wfile.flush()
                time.sleep(raw.interval)
            self.wfile.write(b"0\r\n\r\n")

    return H


_n = [0]


def completion(
    content: Any,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    usage: Any = None,
    cid: str | None = None,
    extra: dict[str, Any] | None = None,
    choices: Any = None,
) -> dict[str, Any]:
    _n[0] += 1
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        msg["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in tool_calls
        ]
    msg.update(extra or {})
    body: dict[str, Any] = {
        "id": cid if cid is not None else f"chatcmpl-{_n[0]}-{time.time_ns()}",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o",
        "choices": choices
        if choices is not None
        else [{"index": 0, "message": msg, "finish_reason": "tool_calls" if tool_calls else "stop"}],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def chunk(
    delta: dict[str, Any] | None = None,
    finish: Any = None,
    *,
    index: int = 0,
    cid: str = "chatcmpl-s",
    usage: Any = None,
    choices: Any = None,
) -> dict[str, Any]:
    c: dict[str, Any] = {"id": cid, "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o"}
    c["choices"] = choices if choices is not None else [{"index": index, "delta": delta or {}, "finish_reason": finish}]
    if usage is not None:
        c["usage"] = usage
    return c


def post(client: Any, key: str, body: Any, **headers: str) -> tuple[int, bytes, Any]:
    kwargs = {"HTTP_CTXWEB_API_KEY": key, "HTTP_AUTHORIZATION": f"Bearer {CALLER_KEY}"}
    kwargs.update({f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()})
    data = body if isinstance(body, bytes) else json.dumps(body)
    response = client.post("/proxy/openai/v1/chat/completions", data=data, content_type="application/json", **kwargs)
    answer = b"".join(response.streaming_content) if response.streaming else response.content
    from sessions_app.api.proxy.recorder import RECORDER

    assert RECORDER.idle(10)
    return response.status_code, answer, response


def stored(team: Any) -> list[list[tuple[str, Any]]]:
    from sessions_app.models import AgentSession, Message

    return [
        list(Message.objects.filter(session=s).order_by("seq").values_list("role", "content"))
        for s in AgentSession.objects.filter(project=team.project).order_by("pk")
    ]
