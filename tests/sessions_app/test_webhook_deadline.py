"""An attempt ends within CTX_WEBHOOK_TIMEOUT_SECONDS (2 s in tests) whatever the receiver does: one
that drips its answer a byte every 0.2 s — the status line, the body, or the TLS handshake — is cut
off at the deadline, not served for as long as it drips; and a huge answer is read only so far."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from sessions_app.models import WebhookAttempt

pytestmark = pytest.mark.django_db

DRIP_SECONDS = 0.2
DRIP_FOR = 6.0  # a receiver stops dripping after this long: an attempt that waits for it took 3× too long
OK_SLOWLY = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
BODY_SLOWLY = (b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", b"x" * 1000)
TLS_SLOWLY = (b"", b"\x16\x03\x03\x40\x00" + b"\x00" * 1000)  # a TLS record header, then its 16 KiB body, slowly
HUGE = (b"HTTP/1.1 200 OK\r\nContent-Length: 104857600\r\n\r\n" + b"x" * 1_000_000, b"")


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


def attempt_to(api, project, url: str) -> tuple[WebhookAttempt, float]:
    response = api.post(f"/api/v1/projects/{project.pk}/webhooks/", {"url": url, "events": ["session.paused"]})
    assert response.status_code == 201, response.content
    started = time.monotonic()
    delivery = api.post(f"/api/v1/webhooks/{response.json()['id']}/test/").json()["id"]
    return WebhookAttempt.objects.get(delivery_id=delivery), time.monotonic() - started


@pytest.mark.parametrize(
    ("scheme", "fast", "slow"),
    [("http", b"", OK_SLOWLY), ("http", *BODY_SLOWLY), ("https", *TLS_SLOWLY)],
    ids=["status-line", "body", "tls-handshake"],
)
def test_a_dripping_receiver_is_cut_off_at_the_deadline(team, api_as, scheme, fast, slow):
    with dripping(fast, slow) as where:
        attempt, took = attempt_to(api_as(team.alice), team.project, f"{scheme}://{where}/hook")
    assert attempt.status_code is None and "timed out" in attempt.error.lower(), attempt.error
    assert 1_900 <= attempt.duration_ms < 2_500 and took < 3.5


def test_a_huge_answer_is_read_only_so_far(team, api_as):
    with dripping(*HUGE) as where:
        attempt, took = attempt_to(api_as(team.alice), team.project, f"http://{where}/hook")
    assert (attempt.status_code, attempt.error) == (200, "")
    assert took < 2
