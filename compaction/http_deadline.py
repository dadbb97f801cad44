"""A timeout for an HTTP exchange as a whole (connect, send, every read of the answer), where httpx's
bounds each read: a server sending a byte now and then renews that for as long as it likes.

``Deadline``: the timeouts of a request are what is left of it, and a timer cuts a connection when it
passes (the read or write blocked on it ends). The proxy holds one over its whole wait
(``CTX_PROXY_TIMEOUT``, a retry included). ``TotalTimeoutTransport`` gives each request sent through
it a deadline of its own timeout, for the Anthropic SDK's calls (``anthropic_calls``).

Pure httpx2: no Django, nothing of ``sessions_app`` (both import it)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

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
        stream = answer.extensions.get("network_stream")
        self.watch_socket(stream.get_extra_info("socket") if stream is not None else None)

    def watch_socket(self, sock: object) -> None:
        """Shut ``sock`` down when the deadline passes, unless ``stop`` comes first."""
        self.stop()
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


class TotalTimeoutTransport(httpx2.BaseTransport):
    """Takes a request's timeout (its longest figure) as the most the whole exchange may take: its
    timeouts become what is left, and the deadline cuts the connection from the moment it opens, so
    neither a slow TLS handshake, nor a status line or body sent a byte at a time, outlasts it. What
    fails once the deadline passed raises ``httpx2.ReadTimeout`` (an SDK's timeout error).

    Connections are not kept alive: a new one's socket is known as it opens (httpcore's ``trace``),
    a pooled one's only once the answer's headers came, too late to bound the wait for them."""

    def __init__(self) -> None:
        self._inner = httpx2.HTTPTransport(limits=httpx2.Limits(max_keepalive_connections=0))

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        total = max((t for t in (request.extensions.get("timeout") or {}).values() if t is not None), default=None)
        if total is None:
            return self._inner.handle_request(request)
        deadline = Deadline(total)
        request.extensions = {
            **request.extensions,
            "timeout": deadline.timeout().as_dict(),
            "trace": _watching(deadline, request.extensions.get("trace")),
        }
        try:
            answer = self._inner.handle_request(request)
        except httpx2.TransportError as exc:
            deadline.stop()
            if _cut(exc, deadline):
                raise _timeout(deadline, request) from exc
            raise
        except BaseException:
            deadline.stop()
            raise
        assert isinstance(answer.stream, httpx2.SyncByteStream)
        return httpx2.Response(
            answer.status_code,
            headers=answer.headers,
            stream=_Bounded(answer.stream, deadline, request),
            extensions=answer.extensions,
        )

    def close(self) -> None:
        self._inner.close()


def _watching(deadline: Deadline, then: Callable[[str, dict[str, Any]], None] | None) -> Callable[..., None]:
    def trace(event: str, info: dict[str, Any]) -> None:
        if event in ("connection.connect_tcp.complete", "connection.connect_unix_socket.complete"):
            deadline.watch_socket(info["return_value"].get_extra_info("socket"))
        if then is not None:
            then(event, info)

    return trace


def _cut(exc: httpx2.TransportError, deadline: Deadline) -> bool:
    """Whether ``exc`` came of the deadline: a cut connection fails as one closed by the server."""
    return not isinstance(exc, httpx2.TimeoutException) and deadline.passed


def _timeout(deadline: Deadline, request: httpx2.Request) -> httpx2.ReadTimeout:
    return httpx2.ReadTimeout(f"The request did not end within its timeout, {deadline.seconds:g} s.", request=request)


class _Bounded(httpx2.SyncByteStream):
    """The answer's body, read until the deadline; the timer stops when it is closed."""

    def __init__(self, stream: httpx2.SyncByteStream, deadline: Deadline, request: httpx2.Request) -> None:
        self._stream, self._deadline, self._request = stream, deadline, request

    def __iter__(self) -> Iterator[bytes]:
        try:
            for chunk in self._stream:
                if self._deadline.passed:  # it came in time, but the caller would read on past it
                    raise _timeout(self._deadline, self._request)
                yield chunk
        except httpx2.TransportError as exc:
            if _cut(exc, self._deadline):
                raise _timeout(self._deadline, self._request) from exc
            raise

    def close(self) -> None:
        self._deadline.stop()
        self._stream.close()
