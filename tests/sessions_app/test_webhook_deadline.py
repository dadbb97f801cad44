"""An attempt ends within CTX_WEBHOOK_TIMEOUT_SECONDS (2 s in tests) whatever the receiver does: one
that drips its answer a byte every 0.2 s — the status line, the body, or the TLS handshake — is cut
off at the deadline, not served for as long as it drips; and a huge answer is read only so far."""

from __future__ import annotations

import time

import pytest

from sessions_app.models import WebhookAttempt
from tests.drip_server import dripping

pytestmark = pytest.mark.django_db

OK_SLOWLY = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
BODY_SLOWLY = (b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", b"x" * 1000)
TLS_SLOWLY = (b"", b"\x16\x03\x03\x40\x00" + b"\x00" * 1000)  # a TLS record header, then its 16 KiB body, slowly
HUGE = (b"HTTP/1.1 200 OK\r\nContent-Length: 104857600\r\n\r\n" + b"x" * 1_000_000, b"")


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
