"""A session's provider requests: one row per exchange however often its recording runs, written
with the reply or not at all; ``GET /sessions/{id}/requests/`` pages them newest first, to the
session's readers only."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import IntegrityError

from compaction.model_prices import TokenUsage
from sessions_app import steps
from sessions_app.models import Message, ProviderRequest
from sessions_app.selectors.spend import session_spend
from sessions_app.services.provider_requests import Answered, provider_request_record
from sessions_app.services.provider_usage import Used

pytestmark = pytest.mark.django_db

MODEL = "claude-sonnet-4-5"
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def answered(n: int = 0, **tokens: int) -> Answered:
    used = Used(model=MODEL, tokens=TokenUsage(**tokens)) if tokens else None
    return Answered(key=uuid.uuid4(), arrived_at=T0 + timedelta(seconds=n), status=200, model=MODEL, used=used)


def exchange(session_id: int, done: Answered) -> dict:
    """What the recorder hands ``steps.proxy_exchange_record`` for one exchange of two messages."""
    reply = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "Hello."}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 3},
    }
    return {
        "session_id": session_id,
        "after_seq": 1,
        "pending": {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]},
        "message": reply,
        "complete": True,
        "key": f"conversation-{session_id}",
        "answered": done,
    }


def test_an_exchange_recorded_twice_has_one_row(session_of):
    session = session_of(model=MODEL)
    done = answered(input=10, output=3)
    for _ in range(2):  # the same exchange's recording, run again
        steps.proxy_exchange_record(**exchange(session.pk, done))
    assert ProviderRequest.objects.filter(session=session).count() == 1
    assert Message.objects.filter(session=session).count() == 2
    steps.proxy_exchange_record(**exchange(session.pk, answered(input=10, output=3)))  # another exchange
    assert ProviderRequest.objects.filter(session=session).count() == 2


def test_a_row_that_cannot_be_written_costs_no_message(session_of, monkeypatch):
    session = session_of(model=MODEL)

    def fails(**_: object) -> None:
        raise IntegrityError("the row could not be written")

    monkeypatch.setattr("sessions_app.services.proxy.exchanges.provider_request_record", fails)
    with pytest.raises(IntegrityError):  # the recorder logs it
        steps.proxy_exchange_record(**exchange(session.pk, answered(input=10, output=3)))
    assert Message.objects.filter(session=session).count() == 2, "the request and its reply"
    assert not ProviderRequest.objects.filter(session=session).exists()


def test_the_cost_is_priced_per_request_and_summed(session_of):
    session = session_of(model=MODEL)
    provider_request_record(session=session, answered=answered(0, input=1000, cache_write=200, output=50))
    provider_request_record(session=session, answered=answered(1, input=10, cache_read=1200, output=80))
    unknown = Answered(key=uuid.uuid4(), arrived_at=T0, status=200, model="no-such-model-9", used=Used())
    provider_request_record(session=session, answered=unknown)
    rows = list(ProviderRequest.objects.filter(session=session, cost_usd__isnull=False))
    spend = session_spend(session)
    assert len(rows) == 2 and spend.cost_usd == sum((r.cost_usd for r in rows), Decimal(0)) > 0
    assert (spend.requests, spend.unpriced, spend.input_tokens, spend.cache_read_input_tokens) == (3, 1, 1010, 1200)


def test_the_list_pages_newest_first_with_the_contracts_fields(api_as, team, session_of):
    session = session_of(model=MODEL)
    for n in range(3):
        provider_request_record(session=session, answered=answered(n, input=100, cache_write=n * 100, cache_read=200))
    provider_request_record(session=session, answered=answered(3))  # an error: nothing read
    first = api_as(team.carol).get(f"/api/v1/sessions/{session.pk}/requests/?page_size=3")
    assert first.status_code == 200
    body = first.json()
    assert body["count"] == 4 and body["next"] and len(body["results"]) == 3
    created = [row["created_at"] for row in body["results"]]
    assert created == sorted(created, reverse=True)
    newest, *_ = body["results"]
    assert newest["cache_hit_ratio"] is None and newest["input_tokens"] == 0 and Decimal(newest["cost_usd"]) == 0
    row = body["results"][1]  # n = 2: 100 + 200 written + 200 read
    assert row["cache_hit_ratio"] == pytest.approx(200 / 500) and row["compacted"] is None
    assert set(row) >= {"id", "model", "status", "ttfb_ms", "duration_ms", "service_tier", "output_tokens"}
    assert {"cache_creation_input_tokens", "cache_read_input_tokens", "cost_usd", "created_at"} <= set(row)
    last = api_as(team.carol).get(body["next"])
    assert [r["cache_creation_input_tokens"] for r in last.json()["results"]] == [0]  # the oldest


def test_outsiders_get_404_and_strangers_401(api_as, team, session_of):
    session = session_of(model=MODEL)
    provider_request_record(session=session, answered=answered(input=1))
    path = f"/api/v1/sessions/{session.pk}/requests/"
    assert api_as(team.mallory).get(path).status_code == 404
    assert api_as(None).get(path).status_code == 401
    assert api_as(team.alice).get(path).json()["count"] == 1


def test_the_schema_documents_it_under_spend(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    operation = schema["paths"]["/api/v1/sessions/{session_id}/requests/"]["get"]
    assert operation["tags"] == ["spend"] and {"200", "404"} <= set(operation["responses"])
