"""A local server that answers slowly on purpose: it reads what it is sent, answers a first part at
once, then the rest one byte every 0.2 s — the receiver (or upstream) that holds a client whose
timeout bounds each read rather than the whole exchange."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

DRIP_SECONDS = 0.2
DRIP_FOR = 6.0  # it stops dripping after this long: a client that waits for it took 3× too long


@contextmanager
def dripping(fast: bytes, slow: bytes) -> Iterator[str]:
    """A receiver that reads what it is sent, answers ``fast`` at once, then ``slow`` a byte at a time."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def answer(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(DRIP_FOR)
            try:
                conn.recv(65536)
                conn.sendall(fast)
                ends = time.monotonic() + DRIP_FOR
                for byte in slow:
                    if stop.is_set() or time.monotonic() > ends:
                        return
                    conn.sendall(bytes([byte]))
                    time.sleep(DRIP_SECONDS)
            except OSError:  # the sender gave up and closed
                return

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        server.close()
