"""One webhook POST whose whole exchange — connect, TLS handshake, send, the status line, the headers
and the part of the body that is read — ends by a deadline.

A socket timeout bounds each read, not the exchange: a receiver that sends one byte a second would
hold an attempt for as long as it likes. Here every send and receive is given what is left of the
attempt's time (the TLS handshake as a whole too), so the attempt ends in time whatever the receiver
does. The answer's body is read to at most ``BODY_LIMIT`` bytes; its status is
what counts."""

from __future__ import annotations

import http.client
import io
import socket
import ssl
import time
from urllib.parse import urlsplit

BODY_LIMIT = 64 * 1024


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        """Seconds left, or ``TimeoutError`` when none are."""
        left = self.at - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out: the receiver did not finish answering in time")
        return left


class _DeadlineReader(io.RawIOBase):
    """The socket's receiving side; each read waits at most for what is left of the deadline."""

    def __init__(self, owner: _DeadlineSocket) -> None:
        self.owner = owner

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        self.owner.sock.settimeout(self.owner.deadline.left())
        return self.owner.sock.recv_into(buffer)

    def close(self) -> None:
        if not self.closed:
            self.owner.reader_closed()
        super().close()


class _DeadlineSocket:
    """What ``http.client`` uses of a socket (sendall, makefile, close), held to the deadline. As with
    a socket's own ``makefile``, the socket stays open until its reader is closed too: the connection
    closes its side as soon as it hands the answer to its response."""

    def __init__(self, sock: socket.socket, deadline: _Deadline) -> None:
        self.sock = sock
        self.deadline = deadline
        self.readers = 0
        self.closing = False

    def sendall(self, data: bytes) -> None:
        self.sock.settimeout(self.deadline.left())  # a timeout bounds the whole of one sendall
        self.sock.sendall(data)

    def makefile(self, mode: str) -> io.BufferedReader:
        self.readers += 1
        return io.BufferedReader(_DeadlineReader(self))

    def reader_closed(self) -> None:
        self.readers -= 1
        if self.closing and not self.readers:
            self.sock.close()

    def close(self) -> None:
        self.closing = True
        if not self.readers:
            self.sock.close()


class _Connection(http.client.HTTPConnection):
    """Connects to ``address`` (the one the URL check vetted; DNS rebinding) while the Host header and
    the certificate name the URL's host."""

    def __init__(self, host: str, port: int | None, *, address: str, tls: bool, deadline: _Deadline) -> None:
        default = http.client.HTTPS_PORT if tls else http.client.HTTP_PORT
        super().__init__(host, port or default)
        self.address, self.tls, self.deadline = address, tls, deadline

    def connect(self) -> None:
        sock = socket.create_connection((self.address, self.port), self.deadline.left())
        try:
            if self.tls:
                # ssl holds one handshake, however many reads it takes, to the socket's timeout.
                sock.settimeout(self.deadline.left())
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise
        self.sock = _DeadlineSocket(sock, self.deadline)


def post(url: str, body: bytes, headers: dict[str, str], *, address: str | None, timeout: float) -> int:
    """POST ``body`` to ``url`` (at ``address`` when given, else the URL's host) and answer the status.
    Raises ``OSError`` (``TimeoutError`` when the deadline passes) or ``http.client.HTTPException``."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    deadline = _Deadline(timeout)
    connection = _Connection(host, parts.port, address=address or host, tls=parts.scheme == "https", deadline=deadline)
    try:
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        connection.request("POST", path, body=body, headers=headers)
        response = connection.getresponse()
        try:
            response.read(BODY_LIMIT)
            return response.status
        finally:
            response.close()
    finally:
        connection.close()
