"""Webhooks through a real Celery worker: the receiver's failures are retried by the worker with
backoff until it answers 200, and a compaction the worker runs is announced by the worker."""

from __future__ import annotations

import time

import pytest

from sessions_app.models import WebhookDelivery
from tests.sessions_app.compaction_helpers import agent_rounds, append
from tests.sessions_app.webhook_receiver import receiver

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker(celery_worker, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    yield celery_worker


def settled(delivery_id: int, seconds: float = 30) -> WebhookDelivery:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        delivery = WebhookDelivery.objects.get(pk=delivery_id)
        if delivery.status in ("delivered", "failed"):
            return delivery
        time.sleep(0.1)
    raise AssertionError(f"delivery {delivery_id} still {delivery.status} after {seconds} s")


def test_the_worker_retries_until_the_receiver_answers(worker, team, api_as):
    with receiver([500, 500, 200]) as rx:
        hook = api_as(team.alice).post(
            f"/api/v1/projects/{team.project.pk}/webhooks/", {"url": rx.url, "events": ["compaction.succeeded"]}
        )
        assert hook.status_code == 201, hook.content
        sent = api_as(team.alice).post(f"/api/v1/webhooks/{hook.json()['id']}/test/")
        delivery = settled(sent.json()["id"])
        assert len(rx.wait_for(3)) == 3
    assert (delivery.status, delivery.attempts) == ("delivered", 3)
    assert list(delivery.log.values_list("status_code", flat=True)) == [500, 500, 200]
    at = list(delivery.log.values_list("at", flat=True))
    assert (at[2] - at[1]) >= (at[1] - at[0])  # the second wait is the doubled backoff (0.2 s, 0.4 s)


def test_a_compaction_in_the_worker_is_announced(worker, team, api_as, session_of):
    session = session_of(model="claude-sonnet-4-5", context_window=30_000, auto_compact=False)
    append(session, agent_rounds(24))
    with receiver() as rx:
        api_as(team.alice).post(
            f"/api/v1/projects/{team.project.pk}/webhooks/", {"url": rx.url, "events": ["compaction.succeeded"]}
        )
        queued = api_as(team.bob).post(f"/api/v1/sessions/{session.pk}/compactions/", {"level": "compact"})
        assert queued.status_code == 202
        (request,) = rx.wait_for(1, timeout=30)
    assert request.json["data"]["compaction"] == queued.json()["id"]
    assert request.json["data"]["saved_tokens"] > 0


def test_the_worker_gives_up_on_a_receiver_that_never_answers(worker, team, api_as):
    # The worker runs with CTX_WEBHOOK_TIMEOUT_SECONDS=1 and CTX_WEBHOOK_MAX_ATTEMPTS=4 (tests/conftest.py).
    with receiver(["hang"] * 10) as rx:
        hook = api_as(team.alice).post(
            f"/api/v1/projects/{team.project.pk}/webhooks/", {"url": rx.url, "events": ["compaction.failed"]}
        )
        sent = api_as(team.alice).post(f"/api/v1/webhooks/{hook.json()['id']}/test/")
        delivery = settled(sent.json()["id"], seconds=60)
    assert (delivery.status, delivery.attempts) == ("failed", 4)
    assert [a.status_code for a in delivery.log.all()] == [None] * 4
    assert all("timed out" in a.error.lower() for a in delivery.log.all())
