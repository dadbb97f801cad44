"""Metrics across processes: a compaction a real Celery worker runs is counted where the web reads."""

from __future__ import annotations

import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sessions_app import metrics
from sessions_app.models import Compaction
from tests.sessions_app.compaction_helpers import agent_rounds, append

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def test_a_compaction_in_the_worker_shows_at_the_web_metrics(celery_worker, settings, client, team, api_as, session_of):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.CTX_METRICS_TOKEN = "t0ken-for-the-test"
    metrics.reset()  # the worker records under the same (default) key, in the same Redis
    session = session_of(model="claude-sonnet-4-5", context_window=30_000, auto_compact=False)
    append(session, agent_rounds(24))
    queued = api_as(team.bob).post(f"/api/v1/sessions/{session.pk}/compactions/", {"level": "compact"}).json()
    deadline = time.monotonic() + 60
    while Compaction.objects.get(pk=queued["id"]).status in ("queued", "running") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert Compaction.objects.get(pk=queued["id"]).status == "succeeded"
    time.sleep(0.5)  # the worker records right after its log line
    text = client.get("/metrics", HTTP_AUTHORIZATION="Bearer t0ken-for-the-test").content.decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert samples[("ctxweb_compactions_total", (("level", "compact"), ("outcome", "succeeded")))] == 1
    assert samples[("ctxweb_compaction_duration_seconds_count", (("level", "compact"),))] == 1
    metrics.reset()
