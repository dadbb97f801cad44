"""A local HTTP receiver for webhook tests: records every request and answers scripted status codes
(or hangs, to test the timeout)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    url: str
    answers: list[int | str] = field(default_factory=list)  # status codes, or "hang"; then 200
    requests: list[Received] = field(default_factory=list)

    def wait_for(self, count: int, timeout: float = 20.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while len(self.requests) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return list(self.requests)


@contextmanager
def receiver(answers: list[int | str] | None = None) -> Iterator[Receiver]:
    state = Receiver(url="", answers=list(answers or []))
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with lock:
                state.requests.append(Received(self.path, dict(self.headers.items()), body))
                answer = state.answers.pop(0) if state.answers else 200
            if answer == "hang":
                time.sleep(3)
                return
            self.send_response(int(answer))
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
