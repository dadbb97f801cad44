"""One deadline for the proxy's whole wait on the upstream (``CTX_PROXY_TIMEOUT``), streamed or not,
retry included; not a timeout per read, which an upstream sending a byte now and then would renew
for as long as it likes. Each request upstream gets what is left as its timeouts; while an answer's
body is read, a timer cuts its connection when the deadline passes (the read blocked on it ends)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import httpx2

CONNECT_TIMEOUT = 10.0  # seconds: an upstream that is up accepts at once


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None

    def left(self) -> float:
        return max(self.at - time.monotonic(), 0.0)

    @property
    def passed(self) -> bool:
        return self.left() <= 0

    def timeout(self) -> httpx2.Timeout:
        left = max(self.left(), 0.001)
        return httpx2.Timeout(left, connect=min(CONNECT_TIMEOUT, left))

    def watch(self, answer: httpx2.Response) -> None:
        """Cut ``answer``'s connection when the deadline passes, unless ``stop`` comes first (it must
        come before the answer is closed: the connection then goes back to the pool)."""
        self.stop()
        stream = answer.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if not isinstance(sock, socket.socket):
            return
        timer = threading.Timer(self.left(), self._cut, (sock,))
        timer.daemon = True
        with self._lock:
            self._timer = timer
        timer.start()

    def stop(self) -> None:
        with self._lock:
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def _cut(self, sock: socket.socket) -> None:
        with self._lock:
            if self._timer is not threading.current_thread():  # stopped, or watching another answer
                return
            self._timer = None
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
