"""STATUS comes from running totals and the model's profile, and follows the policy."""

from __future__ import annotations

from typing import Literal, get_args, get_origin, get_type_hints

import pytest
from django.db.models import Sum

from compaction.messages import normalize_message
from compaction.status import Status
from compaction.tokens import DEFAULT_FRAMING, OfflineTokenizer, calibrate
from sessions_app.models import Message, ModelProfile
from sessions_app.selectors import usage
from sessions_app.services import ingest

pytestmark = pytest.mark.django_db

CONTRACT_FIELDS = {
    "model",
    "context_window",
    "system_prompt",
    "tool_definitions",
    "messages",
    "summary",
    "reserved_output",
    "used",
    "free",
    "usage_percent",
    "level",
    "thresholds",
    "will_compact",
    "compacted",
    "recommendation",
    "token_source",
    "warnings",
}


def append(session, *texts):
    ingest.message_append(session=session, messages=[normalize_message({"role": "user", "content": t}) for t in texts])
    session.refresh_from_db()


def test_status_has_every_contract_field_and_adds_up(session_of, api_as, team):
    session = session_of(system_prompt="You are terse.", tools=[{"name": "f", "input_schema": {"type": "object"}}])
    append(session, "hello " * 100)
    status = api_as(team.carol).get(f"/api/v1/sessions/{session.pk}/status/").json()
    assert set(status) >= CONTRACT_FIELDS
    assert status["used"] == sum(status[k] for k in ("system_prompt", "tool_definitions", "messages", "summary"))
    assert status["free"] == status["context_window"] - status["used"] - status["reserved_output"]
    assert status["token_source"] == "estimate"
    assert status["context_window"] == 200_000


def test_status_uses_totals_and_the_calibration_factor(session_of):
    session = session_of(model="claude-sonnet-4-5", system_prompt="sys " * 50)
    append(session, "alpha " * 300, "beta " * 200)
    raw_messages = Message.objects.filter(session=session).aggregate(t=Sum("tokens"))["t"]
    ModelProfile.objects.filter(name="claude-sonnet-4-5").update(calibration_factor=1.5)
    usage.forget_model_profiles()
    status = usage.session_status(session)
    assert status["messages"] == calibrate(raw_messages + DEFAULT_FRAMING.request, 1.5)
    assert status["system_prompt"] == calibrate(OfflineTokenizer().count_system("sys " * 50), 1.5)


def test_status_does_not_retokenize(session_of, monkeypatch):
    session = session_of()
    append(session, "some text")

    def boom(*args, **kwargs):
        raise AssertionError("status must not count tokens")

    monkeypatch.setattr(OfflineTokenizer, "count_text", boom)
    assert usage.session_status(session)["messages"] > 0


def test_levels_follow_the_policy_and_the_window(session_of):
    session = session_of(model="gpt-4o", context_window=2_000)  # calibration 1.0: a word is a token
    append(session, "word " * 1_300)  # ~65 % of the window
    status = usage.session_status(session)
    assert status["level"] == "remind"
    assert status["will_compact"] is False
    append(session, "word " * 200)
    status = usage.session_status(session)
    assert status["level"] == "compact"
    assert status["will_compact"] is True
    assert "compaction" in status["recommendation"].lower()


def test_auto_compact_false_means_will_not_compact(session_of):
    session = session_of(context_window=2_000, auto_compact=False)
    append(session, "word " * 1_800)
    status = usage.session_status(session)
    assert status["level"] in ("summarize", "handoff")
    assert status["will_compact"] is False


def test_unknown_model_falls_back_to_128k_with_a_warning(session_of):
    status = usage.session_status(session_of(model="my-local-llama"))
    assert status["context_window"] == 128_000
    assert any("not known" in w for w in status["warnings"])


def test_session_window_override_wins(session_of):
    assert usage.session_status(session_of(model="gpt-4o", context_window=50_000))["context_window"] == 50_000


def test_over_the_window_warns(session_of):
    session = session_of(context_window=1_024)
    append(session, "word " * 2_000)
    status = usage.session_status(session)
    assert status["free"] < 0
    assert status["level"] == "handoff"
    assert any("larger than the model's window" in w for w in status["warnings"])


def test_models_endpoint_lists_claude_and_openai(api_as, team):
    data = api_as(team.carol).get("/api/v1/models/").json()
    names = {row["name"]: row for row in data["results"]}
    assert names["claude-sonnet-4-5"]["context_window"] == 200_000
    assert names["gpt-4o"]["context_window"] == 128_000
    assert data["fallback_context_window"] == 128_000


def test_schema_and_docs_are_served(client, team):
    client.force_login(team.alice.user)
    schema = client.get("/api/schema/")
    assert schema.status_code == 200
    assert b"/api/v1/sessions/{session_id}/messages/" in schema.content
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    assert b"cdn" not in docs.content.lower()


def test_status_is_exactly_the_typed_status(session_of):
    """compaction.status.Status is STATUS's one definition (ctxclient uses it): every key, each of its type."""
    session = session_of(system_prompt="You are terse.")
    append(session, "hello " * 100)
    status = usage.session_status(session)
    assert set(status) == set(Status.__annotations__)
    hints = get_type_hints(Status)
    for key, value in status.items():
        hint = hints[key]
        if get_origin(hint) is Literal:
            assert value in get_args(hint), key
        elif hint is float:
            assert isinstance(value, int | float) and not isinstance(value, bool), key
        elif hint in (int, str, bool):
            assert type(value) is hint, key
        elif hint == int | None:
            assert value is None or type(value) is int, key
        elif hint == list[str]:
            assert all(isinstance(item, str) for item in value), key
        else:
            assert set(value) == set(get_type_hints(hint)), key
