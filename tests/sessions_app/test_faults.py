"""Faults at the edges we don't own — the database, the broker, the cache — met with a clear answer,
no 500 and nothing half-written. (Real outages of real services: tests/faults/.)"""

from __future__ import annotations

import psycopg
import pytest
from django.core.cache import caches
from django.db import OperationalError
from django.test import override_settings
from kombu.exceptions import OperationalError as BrokerDown

from sessions_app import tasks
from sessions_app.models import AgentSession, Compaction, Message, ToolUse
from sessions_app.selectors import access, sql_rows, usage
from sessions_app.services import ingest
from tests.sessions_app.compaction_helpers import agent_rounds, append

pytestmark = pytest.mark.django_db


def lost_connection(text: str = "server closed the connection unexpectedly") -> OperationalError:
    """What Django raises when the server goes away: its error, caused by the driver's."""
    try:
        raise psycopg.OperationalError(text)
    except psycopg.OperationalError as driver:
        error = OperationalError(text)
        error.__cause__ = driver
        return error


def test_a_database_outage_answers_503_with_retry_after(api_as, team, session_of, monkeypatch, client):
    session = session_of()

    def down(**kwargs):
        raise lost_connection()

    monkeypatch.setattr(ingest, "message_append", down)
    response = api_as(team.bob).post(f"/api/v1/sessions/{session.pk}/messages/", {"role": "user", "content": "hi"})
    assert response.status_code == 503 and response["Retry-After"] == "5"
    assert response.json() == {
        "detail": "The database is unavailable for a moment; retry shortly.",
        "code": "database_unavailable",
    }
    monkeypatch.setattr(access, "project_list_for", lambda user: (_ for _ in ()).throw(lost_connection()))
    client.force_login(team.bob.user)
    page = client.get("/projects/")
    assert page.status_code == 503 and page["Retry-After"] == "5"


def test_a_database_bug_is_not_disguised_as_an_outage(api_as, team, session_of, monkeypatch):
    session = session_of()

    def bug(**kwargs):
        raise OperationalError("no such table: sessions_app_message")

    monkeypatch.setattr(ingest, "message_append", bug)
    with pytest.raises(OperationalError):  # a 500 with a traceback in the log, as a bug should be
        api_as(team.bob).post(f"/api/v1/sessions/{session.pk}/messages/", {"role": "user", "content": "hi"})


def test_a_batch_cut_off_by_the_database_is_stored_whole_or_not_at_all(api_as, team, session_of, monkeypatch):
    session = session_of()
    batch = [
        {"role": "user", "content": "run it", "client_id": "b1"},
        {
            "role": "assistant",
            "client_id": "b2",
            "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "make"}}],
        },
        {"role": "user", "client_id": "b3", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
    ]
    real = sql_rows.rows_with
    written: list[int] = []

    def lost_after_the_writes(main, before):  # the messages and tool calls go in; the answer never comes
        written.append(len(real(main, before)))
        raise lost_connection("terminating connection due to administrator command")

    monkeypatch.setattr(sql_rows, "rows_with", lost_after_the_writes)
    bob = api_as(team.bob)
    assert bob.post(f"/api/v1/sessions/{session.pk}/messages/", batch).status_code == 503
    assert written == [3]  # the three rows were inserted before the connection went
    assert not Message.objects.filter(session=session).exists() and not ToolUse.objects.filter(session=session).exists()
    session.refresh_from_db()
    assert (session.last_seq, session.message_count, session.message_tokens) == (0, 0, 0)
    monkeypatch.setattr(sql_rows, "rows_with", real)
    assert bob.post(f"/api/v1/sessions/{session.pk}/messages/", batch).status_code == 201
    assert bob.post(f"/api/v1/sessions/{session.pk}/messages/", batch).status_code == 201  # a retry: no doubles
    assert list(Message.objects.filter(session=session).values_list("client_id", flat=True)) == ["b1", "b2", "b3"]


def test_with_the_broker_down_appends_are_answered_and_the_work_catches_up(settings, session_of, monkeypatch):
    """Sending to the broker fails: the append still answers, the compaction stays recorded as
    queued, STATUS says work is pending, and the periodic re-send runs it once the broker is back."""
    settings.CTX_PENDING_WARNING_SECONDS = 0
    settings.CTX_REQUEUE_AFTER_SECONDS = 0
    session = session_of(model="claude-sonnet-4-5", context_window=30_000)

    def broker_down(*args, **kwargs):
        raise BrokerDown("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(tasks.run_compaction, "apply_async", broker_down)
    append(session, agent_rounds(24))
    assert Message.objects.filter(session=session).count() == len(agent_rounds(24))
    record = Compaction.objects.get(session=session)
    assert record.status == "queued"
    warnings = usage.session_status(AgentSession.objects.get(pk=session.pk))["warnings"]
    assert any("waited" in w and "workers may be down" in w for w in warnings), warnings
    assert tasks.requeue_stale_compactions() == 0  # still down: nothing sent, nothing lost
    monkeypatch.undo()
    assert tasks.requeue_stale_compactions() == 1
    record.refresh_from_db()
    assert record.status == "succeeded"


@override_settings(
    CACHES={
        "default": {
            "BACKEND": "ctxweb.cache.ResilientRedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens there
            "OPTIONS": {"socket_connect_timeout": 0.2, "socket_timeout": 0.2},
        }
    },
)
def test_with_the_cache_down_requests_still_work(settings, api_as, team, session_of):
    settings.CTX_RATE_LIMIT_KEY = "100/minute"  # the limiter reads the cache on every request
    cache = caches["default"]
    assert cache.get("anything", "missing") == "missing" and cache.add("k", 1) is False
    session = session_of()
    bob = api_as(team.bob)
    assert bob.post(f"/api/v1/sessions/{session.pk}/messages/", {"role": "user", "content": "hi"}).status_code == 201
    assert bob.get(f"/api/v1/sessions/{session.pk}/status/").status_code == 200
