"""STATUS says when the count was made (``counted_at``) and how precise its source is
(``expected_error``): 0 for a provider's count, cached or not; the estimate's measured spread."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from compaction.messages import normalize_message
from compaction.tokens import ESTIMATE_EXPECTED_ERROR
from sessions_app.models import AgentSession, Compaction, CompactionStatus
from sessions_app.selectors import usage
from sessions_app.services import counting, exact_usage, ingest, webhook_events
from tests.fakes.anthropic_server import FakeAnthropic


@pytest.fixture
def fake(settings):
    with FakeAnthropic() as server:
        settings.ANTHROPIC_API_KEY = "test-key"
        settings.ANTHROPIC_BASE_URL = server.base_url
        settings.ANTHROPIC_MAX_RETRIES = 0
        yield server


def _appended(session: AgentSession, text: str | None = None) -> AgentSession:
    text = text or f"nonce {uuid.uuid4()} " + "Read the build log and fix the failing test. " * 60
    with override_settings(ANTHROPIC_API_KEY=""):
        ingest.message_append(session=session, messages=[normalize_message({"role": "user", "content": text})])
    session.refresh_from_db()
    return session


def _at(status) -> object:
    return parse_datetime(status["counted_at"])


def test_the_estimates_figure_is_the_measured_held_out_spread():
    # docs/TOKEN_COUNTING.md: bench/calibrate.py's leave-one-file-out 90th percentile, 15.5 %.
    assert ESTIMATE_EXPECTED_ERROR == 0.155


@pytest.mark.django_db
def test_an_estimate_is_counted_when_its_totals_last_moved(session_of):
    session = _appended(session_of(model="claude-sonnet-4-5"))
    status = usage.session_status(session)
    assert status["token_source"] == "estimate"
    assert status["expected_error"] == ESTIMATE_EXPECTED_ERROR
    assert status["counted_at"].endswith("Z") and _at(status) == session.last_activity_at
    # A compaction that changed messages after the newest one moves the figures: counted then.
    later = session.last_activity_at + timedelta(minutes=5)
    Compaction.objects.create(
        session=session,
        project_id=session.project_id,
        level="compact",
        status=CompactionStatus.SUCCEEDED,
        finished_at=later,
        revertible_until=later + timedelta(days=1),
    )
    assert _at(usage.session_status(session)) == later


@pytest.mark.django_db
def test_an_exact_count_is_counted_when_anthropic_counted_it_cached_or_not(fake, session_of):
    session = _appended(session_of(model="claude-sonnet-4-5"))
    before = timezone.now()
    assert counting.session_count_exact(session_id=session.pk) == "counted"
    session.refresh_from_db()
    status = usage.session_status(session)
    assert (status["token_source"], status["cached"], status["expected_error"]) == ("exact", False, 0.0)
    assert _at(status) == session.exact_counted_at and _at(status) >= before
    assert counting.session_count_exact(session_id=session.pk) == "counted"  # the cache answers now
    session.refresh_from_db()
    again = usage.session_status(session)
    assert (again["cached"], again["expected_error"]) == (True, 0.0)
    assert _at(again) == session.exact_counted_at and _at(again) >= _at(status)
    _appended(session, "and one more thing")  # the exact count no longer holds
    newer = usage.session_status(session)
    assert (newer["token_source"], newer["expected_error"]) == ("estimate", ESTIMATE_EXPECTED_ERROR)
    assert _at(newer) == session.last_activity_at


@pytest.mark.django_db
def test_a_responses_usage_is_exact_too(session_of):
    session = _appended(session_of(model="claude-sonnet-4-5"))
    raw = session.system_tokens + session.message_tokens + 3
    exact_usage.exact_usage_record(
        session=session, read=int(raw * 1.3), wrote=0, upto_seq=session.last_seq, raw_request=raw, source="test"
    )
    session.refresh_from_db()
    status = usage.session_status(session)
    assert (status["token_source"], status["expected_error"]) == ("exact", 0.0)
    assert _at(status) == session.exact_counted_at


@pytest.mark.django_db
def test_the_api_and_the_page_say_it(team, session_of, api_as, client):
    session = _appended(session_of(model="claude-sonnet-4-5"))
    status = api_as(team.bob).get(f"/api/v1/sessions/{session.pk}/status/").json()
    assert status["expected_error"] == ESTIMATE_EXPECTED_ERROR
    assert _at(status) == session.last_activity_at
    client.force_login(team.bob.user)
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert "estimated, ± 15.5 %" in page
    assert f'<time datetime="{status["counted_at"]}">' in page


@pytest.mark.django_db
@pytest.mark.parametrize("factor", [0.3, 0.7, 0.95, 1.1, 1.6, 2.5])
@pytest.mark.parametrize("fill", [0.4, 0.65, 0.8])
def test_a_responses_usage_stores_the_level_it_gives_and_a_change_is_announced_once(team, session_of, fill, factor):
    """The exact count, the level and the usage it gives are written together (one UPDATE when the
    level stays; the announcing path when it moves): whatever the figure, the row holds the level
    its figures give, and a level that moved is announced once."""
    from sessions_app.models import Webhook, WebhookDelivery

    Webhook.objects.create(project=team.project, url="https://hooks.example.com/x", events=["session.level_changed"])
    session = _appended(session_of(model="claude-sonnet-4-5", auto_compact=False))
    raw = session.system_tokens + session.message_tokens + 3
    session.context_window_override = max(1_000, int(raw / fill))
    session.save(update_fields=["context_window_override"])
    _appended(session, "one more")
    webhook_events.session_level_record(session)  # the append's next step: the level its figures give
    WebhookDelivery.objects.all().delete()
    before = session.level
    raw = session.system_tokens + session.message_tokens + 3
    believed = exact_usage.exact_usage_record(
        session=session, read=int(raw * factor), wrote=0, upto_seq=session.last_seq, raw_request=raw, source="test"
    )
    stored = AgentSession.objects.get(pk=session.pk)
    worked_out = usage.session_usage(stored)
    assert (stored.level, stored.usage_percent) == (worked_out.level.value, worked_out.usage_percent)
    assert (session.level, session.usage_percent) == (stored.level, stored.usage_percent)  # the caller's row too
    assert stored.exact_tokens == (int(raw * factor) if believed else None)
    announced = WebhookDelivery.objects.filter(event="session.level_changed").count()
    assert announced == (1 if before and stored.level != before else 0), (before, stored.level)
