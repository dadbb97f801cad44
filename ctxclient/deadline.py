"""urllib handlers whose whole exchange ends by a deadline.

``urlopen(..., timeout=)`` bounds each connect and each read, not the request: a server (or a proxy
in between) that answers a byte at a time holds the caller for as long as it drips. Through these
handlers every send and receive gets what is left of the request's time (the TLS handshake as a
whole too), and at the deadline a read raises ``TimeoutError``.

``Deadline`` and ``DeadlineSocket`` are the standard-library pieces under them; ctxweb's webhook
delivery (``sessions_app/services/webhook_http.py``) holds its POSTs to a deadline with them too.
"""

from __future__ import annotations

import http.client
import io
import socket
import time
import urllib.request
from typing import Any


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        """Seconds left, or ``TimeoutError`` when none are."""
        left = self.at - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out: the answer did not finish in time")
        return left


class _Reader(io.RawIOBase):
    """The socket's receiving side; each read waits at most for what is left of the deadline."""

    def __init__(self, owner: DeadlineSocket) -> None:
        self.owner = owner

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self.owner.sock.settimeout(self.owner.deadline.left())
        return self.owner.sock.recv_into(buffer)

    def close(self) -> None:
        if not self.closed:
            self.owner.reader_closed()
        super().close()


class DeadlineSocket:
    """What ``http.client`` uses of a socket (sendall, makefile, close), held to the deadline. As with
    a socket's own ``makefile``, the socket stays open until its reader is closed too: the connection
    closes its side as soon as it hands the answer to its response."""

    def __init__(self, sock: socket.socket, deadline: Deadline) -> None:
        self.sock = sock
        self.deadline = deadline
        self.readers = 0
        self.closing = False

    def sendall(self, data: bytes) -> None:
        self.sock.settimeout(self.deadline.left())  # a timeout bounds the whole of one sendall
        self.sock.sendall(data)

    def makefile(self, mode: str) -> io.BufferedReader:
        self.readers += 1
        return io.BufferedReader(_Reader(self))

    def reader_closed(self) -> None:
        self.readers -= 1
        if self.closing and not self.readers:
            self.sock.close()

    def close(self) -> None:
        self.closing = True
        if not self.readers:
            self.sock.close()


class _Connect:
    """Connects within what is left of the deadline (ssl holds a handshake to the socket's timeout as
    a whole), then hands http.client the deadline socket."""

    deadline: Deadline
    timeout: float | None
    sock: Any

    def connect(self) -> None:
        self.timeout = self.deadline.left()
        super().connect()  # type: ignore[misc]
        self.sock = DeadlineSocket(self.sock, self.deadline)


class _HTTPConnection(_Connect, http.client.HTTPConnection):
    pass


class _HTTPSConnection(_Connect, http.client.HTTPSConnection):
    pass


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._connection, req)

    def _connection(self, host: str, **kwargs: Any) -> http.client.HTTPConnection:
        connection = _HTTPConnection(host, **kwargs)
        connection.deadline = self.deadline
        return connection


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._connection, req, context=self._context)  # type: ignore[attr-defined]

    def _connection(self, host: str, **kwargs: Any) -> http.client.HTTPSConnection:
        connection = _HTTPSConnection(host, **kwargs)
        connection.deadline = self.deadline
        return connection


def opener(seconds: float) -> urllib.request.OpenerDirector:
    """An opener whose every request (connect, send, the whole answer) ends within ``seconds``."""
    deadline = Deadline(seconds)
    return urllib.request.build_opener(_HTTPHandler(deadline), _HTTPSHandler(deadline))
