"""/metrics: off unless configured, for the token or the allowed networks only; the counters move by
exactly what happened (messages, tokens, compactions by level and outcome, summarizer errors); the
gauges are the database's; and JSON logs carry an event's figures."""

from __future__ import annotations

import json
import logging
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ctxweb.logs import JsonFormatter
from sessions_app import metrics
from sessions_app.models import Message
from sessions_app.selectors import usage
from sessions_app.services import compaction_records, compaction_runs
from tests.sessions_app.compaction_helpers import agent_rounds, append

pytestmark = pytest.mark.django_db

TOKEN = "scrape-me-0123456789"


@pytest.fixture
def scrape(client, settings):
    settings.CTX_METRICS_TOKEN = TOKEN
    settings.CTX_METRICS_KEY = f"ctxweb:test-metrics:{id(settings)}"
    metrics.reset()

    def read() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
        assert response.status_code == 200, response.content
        assert response["Content-Type"].startswith("text/plain")
        return {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(response.content.decode())
            for sample in family.samples
        }

    yield read
    metrics.reset()


def value(samples, name, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_are_off_unless_configured(client):
    assert client.get("/metrics").status_code == 404


def test_a_token_or_an_allowed_network_is_needed(client, settings):
    settings.CTX_METRICS_TOKEN = TOKEN
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}x").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200
    settings.CTX_METRICS_TOKEN = ""
    settings.CTX_METRICS_ALLOWED_NETWORKS = ["10.0.0.0/8", "192.168.1.7"]
    assert client.get("/metrics", REMOTE_ADDR="10.2.3.4").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="192.168.1.7").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="192.168.1.8").status_code == 401
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 401
    assert client.post("/metrics", REMOTE_ADDR="10.2.3.4").status_code == 405


def test_appends_move_the_counters_by_exactly_what_was_stored(scrape, session_of, api_as, team):
    before = scrape()
    session = session_of(auto_compact=False)
    append(session, agent_rounds(5, output_lines=20))
    retried = api_as(team.bob).post(
        f"/api/v1/sessions/{session.pk}/messages/", [{"role": "user", "content": "again", "client_id": "c1"}]
    )
    assert retried.status_code == 201
    api_as(team.bob).post(
        f"/api/v1/sessions/{session.pk}/messages/", [{"role": "user", "content": "again", "client_id": "c1"}]
    )
    after = scrape()
    rows = Message.objects.filter(session=session)
    assert (
        value(after, "ctxweb_messages_appended_total") - value(before, "ctxweb_messages_appended_total") == rows.count()
    )
    tokens = sum(rows.values_list("tokens", flat=True))
    assert value(after, "ctxweb_tokens_ingested_total") - value(before, "ctxweb_tokens_ingested_total") == tokens
    # One observation per append that stored something (the retry with the same client id stored nothing).
    appends = value(after, "ctxweb_append_duration_seconds_count") - value(
        before, "ctxweb_append_duration_seconds_count"
    )
    assert appends == 2
    assert value(after, "ctxweb_append_duration_seconds_bucket", le="+Inf") == value(
        after, "ctxweb_append_duration_seconds_count"
    )
    for _ in range(3):
        api_as(team.carol).get(f"/api/v1/sessions/{session.pk}/status/")
    assert value(scrape(), "ctxweb_status_duration_seconds_count") == 3


def test_compactions_and_summarizer_errors_are_counted_by_level_and_outcome(scrape, session_of, api_as, team):
    session = session_of(model="claude-sonnet-4-5", context_window=30_000, auto_compact=False)
    append(session, agent_rounds(24))
    assert api_as(team.bob).post(f"/api/v1/sessions/{session.pk}/compactions/", {"level": "compact"}).status_code == 202
    record = compaction_runs.compaction_request(session=session, level="summarize", user=None)
    compaction_records.compaction_fail(record.pk, "never ran")  # failed without a run: not a run's outcome
    samples = scrape()
    assert value(samples, "ctxweb_compactions_total", level="compact", outcome="succeeded") == 1
    assert value(samples, "ctxweb_compactions_total", level="summarize", outcome="failed") == 0
    assert value(samples, "ctxweb_compaction_duration_seconds_count", level="compact") == 1
    assert value(samples, "ctxweb_compaction_duration_seconds_sum", level="compact") > 0
    metrics.summarizer_error(permanent=True)
    metrics.summarizer_error(permanent=False)
    metrics.summarizer_error(permanent=False)
    samples = scrape()
    assert value(samples, "ctxweb_summarizer_errors_total", kind="transient") == 2
    assert value(samples, "ctxweb_summarizer_errors_total", kind="permanent") == 1


def test_gauges_are_read_from_the_database(scrape, session_of, team):
    sessions = [session_of(name=f"s{n}", context_window=12_000, auto_compact=False) for n in range(3)]
    for n, session in enumerate(sessions):
        append(session, agent_rounds(n * 4, output_lines=40) if n else [{"role": "user", "content": "hi"}])
    queued = compaction_runs.compaction_request(session=sessions[2], level="compact", user=None)
    samples = scrape()
    assert value(samples, "ctxweb_compaction_queue_depth") == 1
    assert value(samples, "ctxweb_oldest_queued_compaction_age_seconds") >= 0
    levels = [usage.session_status(s)["level"] for s in sessions]
    for level in ("ok", "remind", "compact", "summarize", "handoff"):
        assert value(samples, "ctxweb_sessions", level=level) == levels.count(level), level
    compaction_records.compaction_fail(queued.pk, "gone")
    assert value(scrape(), "ctxweb_compaction_queue_depth") == 0


def test_json_logs_carry_the_figures(caplog, session_of):
    session = session_of(auto_compact=False)
    with caplog.at_level(logging.INFO, logger="sessions_app.services.ingest"):
        append(session, agent_rounds(2, output_lines=10))
    record = next(r for r in caplog.records if getattr(r, "event", None) == "append")
    line = json.loads(JsonFormatter().format(record))
    assert line["event"] == "append" and line["session"] == session.pk
    assert line["messages"] == Message.objects.filter(session=session).count()
    assert line["tokens"] == sum(Message.objects.filter(session=session).values_list("tokens", flat=True))
    assert line["level"] == "INFO" and line["logger"] == "sessions_app.services.ingest"
    assert "\n" not in JsonFormatter().format(record)


def test_a_burst_of_request_events_reaches_redis_in_one_round_trip_without_a_scrape(settings, monkeypatch):
    """Appends and STATUS are every request's: their events wait in the process up to FLUSH_SECONDS
    and go together, and go without anything reading them (another process scrapes)."""
    from tests.conftest import _redis_configured, need

    need(_redis_configured(), "REDIS_URL is not set")
    settings.CTX_METRICS_KEY = f"ctxweb:test-metrics-burst:{id(settings)}"
    metrics.reset()
    sent: list[int] = []
    flush = metrics.flush

    def counted() -> None:
        with metrics._lock:
            sent.append(len(metrics._pending))
        flush()

    monkeypatch.setattr(metrics, "flush", counted)
    for _ in range(3):
        metrics.messages_appended(messages=2, tokens=10, seconds=0.01)
        metrics.status_served(seconds=0.002)
    client = metrics._redis()
    deadline = time.monotonic() + 10 * metrics.FLUSH_SECONDS
    while not client.hget(settings.CTX_METRICS_KEY, "ctxweb_messages_appended_total||") and time.monotonic() < deadline:
        time.sleep(0.05)
    stored = {k.decode(): float(v) for k, v in client.hgetall(settings.CTX_METRICS_KEY).items()}
    assert stored["ctxweb_messages_appended_total||"] == 6 and stored["ctxweb_status_duration_seconds||count"] == 3
    assert [n for n in sent if n] == [len(stored)]  # one round trip carried every series of the burst
    metrics.reset()
