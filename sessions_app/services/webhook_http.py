"""One webhook POST whose whole exchange — connect, TLS handshake, send, the status line, the headers
and the part of the body that is read — ends by a deadline.

A socket timeout bounds each read, not the exchange: a receiver that sends one byte a second would
hold an attempt for as long as it likes. Here every send and receive is given what is left of the
attempt's time (the TLS handshake as a whole too), so the attempt ends in time whatever the receiver
does. The answer's body is read to at most ``BODY_LIMIT`` bytes; its status is
what counts."""

from __future__ import annotations

import http.client
import socket
import ssl
from urllib.parse import urlsplit

from ctxclient.deadline import Deadline, DeadlineSocket

BODY_LIMIT = 64 * 1024


class _Connection(http.client.HTTPConnection):
    """Connects to ``address`` (the one the URL check vetted; DNS rebinding) while the Host header and
    the certificate name the URL's host."""

    def __init__(self, host: str, port: int | None, *, address: str, tls: bool, deadline: Deadline) -> None:
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
        self.sock = DeadlineSocket(sock, self.deadline)


def post(url: str, body: bytes, headers: dict[str, str], *, address: str | None, timeout: float) -> int:
    """POST ``body`` to ``url`` (at ``address`` when given, else the URL's host) and answer the status.
    Raises ``OSError`` (``TimeoutError`` when the deadline passes) or ``http.client.HTTPException``."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    deadline = Deadline(timeout)
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
