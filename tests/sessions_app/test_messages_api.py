"""Appending messages: seqs, totals, idempotent retries, and every kind of bad input (4xx, nothing written)."""

from __future__ import annotations

import json

import pytest
from django.db.models import Sum

from sessions_app.models import AgentSession, Message, ToolUse

pytestmark = pytest.mark.django_db


@pytest.fixture
def bob(team, api_as):
    return api_as(team.bob)


@pytest.fixture
def session(session_of):
    return session_of(name="ingest", model="claude-sonnet-4-5")


def url(session) -> str:
    return f"/api/v1/sessions/{session.pk}/messages/"


def call_and_result(seq_id: str, n: int) -> list[dict]:
    return [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Running."},
                {"type": "tool_use", "id": seq_id, "name": "bash", "input": {"cmd": "ls"}},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": seq_id, "content": "a\nb\n" * n}]},
    ]


def test_append_assigns_seqs_and_answers_with_status(bob, session):
    first = bob.post(url(session), {"role": "user", "content": "Please list the files."})
    assert first.status_code == 201
    body = first.json()
    assert [m["seq"] for m in body["messages"]] == [1]
    second = bob.post(url(session), call_and_result("toolu_1", 50))
    assert [m["seq"] for m in second.json()["messages"]] == [2, 3]
    status = second.json()["status"]
    assert (
        status["used"] == status["system_prompt"] + status["tool_definitions"] + status["messages"] + status["summary"]
    )
    assert status["free"] == status["context_window"] - status["used"] - status["reserved_output"]
    session.refresh_from_db()
    stored = Message.objects.filter(session=session)
    assert session.last_seq == 3 == stored.count()
    assert session.message_tokens == stored.aggregate(t=Sum("tokens"))["t"]
    assert ToolUse.objects.filter(session=session, tool_use_id="toolu_1").count() == 1


def test_openai_style_tool_calls_are_normalised(bob, session):
    response = bob.post(
        url(session),
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_9", "type": "function", "function": {"name": "get", "arguments": '{"x": 1}'}}
                ],
            },
            {"role": "tool", "tool_call_id": "call_9", "content": "42"},
        ],
    )
    assert response.status_code == 201
    first, second = response.json()["messages"]
    assert first["content"] == [{"type": "tool_use", "id": "call_9", "name": "get", "input": {"x": 1}}]
    assert second["content"] == [{"type": "tool_result", "tool_use_id": "call_9", "content": "42"}]


def test_retry_with_same_client_id_stores_nothing_twice(bob, session):
    batch = [
        {"role": "user", "content": "one", "client_id": "c-1"},
        {"role": "assistant", "content": "two", "client_id": "c-2"},
    ]
    first = bob.post(url(session), batch)
    again = bob.post(url(session), batch)
    assert first.status_code == again.status_code == 201
    assert [m["id"] for m in first.json()["messages"]] == [m["id"] for m in again.json()["messages"]]
    assert [m["seq"] for m in again.json()["messages"]] == [1, 2]
    session.refresh_from_db()
    assert Message.objects.filter(session=session).count() == 2 == session.message_count


def test_partly_retried_batch_stores_only_the_new_messages(bob, session):
    bob.post(url(session), {"role": "user", "content": "one", "client_id": "c-1"})
    mixed = bob.post(
        url(session),
        [
            {"role": "user", "content": "one", "client_id": "c-1"},
            {"role": "assistant", "content": "two", "client_id": "c-2"},
        ],
    )
    assert [m["seq"] for m in mixed.json()["messages"]] == [1, 2]
    assert Message.objects.filter(session=session).count() == 2


def _nothing_written(session: AgentSession, before: tuple) -> bool:
    session.refresh_from_db()
    return (Message.objects.filter(session=session).count(), session.last_seq, session.message_tokens) == before


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        pytest.param(b"{not json", 400, "parse_error", id="malformed-json"),
        pytest.param({"role": "robot", "content": "hi"}, 400, "invalid_role", id="unknown-role"),
        pytest.param({"role": "user", "content": 42}, 400, "invalid_content", id="content-wrong-type"),
        pytest.param({"role": "user", "content": [{"kind": "video"}]}, 400, "invalid_content", id="block-without-type"),
        pytest.param(
            {"role": "user", "content": [{"type": "text", "text": 5}]}, 400, "invalid_content", id="text-not-string"
        ),
        pytest.param({"role": "user", "content": "x", "client_id": 7}, 400, "invalid_client_id", id="client-id-type"),
        pytest.param(
            {"role": "user", "content": "x", "created_at": "yesterday"}, 400, "invalid_created_at", id="bad-date"
        ),
        pytest.param("just a string", 400, "invalid_message", id="not-an-object"),
        pytest.param([], 400, "empty_batch", id="empty-batch"),
        pytest.param(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_nowhere", "content": "x"}]},
            400,
            "unknown_tool_use_id",
            id="orphan-tool-result",
        ),
        pytest.param({"role": "tool", "content": "no result block"}, 400, "invalid_content", id="tool-without-result"),
        pytest.param(
            [
                {"role": "user", "content": "a", "client_id": "same"},
                {"role": "user", "content": "b", "client_id": "same"},
            ],
            400,
            "duplicate_client_id",
            id="duplicate-client-id-in-batch",
        ),
    ],
)
def test_bad_input_is_refused_and_writes_nothing(bob, session, body, status, code):
    bob.post(url(session), {"role": "user", "content": "existing"})
    session.refresh_from_db()
    before = (1, session.last_seq, session.message_tokens)
    raw = body if isinstance(body, bytes) else json.dumps(body)
    response = bob.post(url(session), raw)
    assert response.status_code == status
    assert response.json()["code"] == code
    assert response.json()["detail"]
    assert _nothing_written(session, before)


def test_one_bad_message_in_a_batch_stores_none(bob, session):
    batch = [{"role": "user", "content": f"m{i}"} for i in range(5)] + [{"role": "user", "content": {"oops": 1}}]
    response = bob.post(url(session), batch)
    assert response.status_code == 400
    assert "messages[5]" in response.json()["detail"]
    assert Message.objects.filter(session=session).count() == 0


def test_batch_with_orphan_tool_result_late_in_batch_stores_none(bob, session):
    batch = [
        {"role": "user", "content": "hi"},
        *call_and_result("toolu_ok", 1),
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_missing", "content": "?"}]},
    ]
    response = bob.post(url(session), batch)
    assert response.status_code == 400
    assert response.json()["code"] == "unknown_tool_use_id"
    assert Message.objects.filter(session=session).count() == 0
    assert ToolUse.objects.filter(session=session).count() == 0


def test_tool_result_may_answer_a_call_from_an_earlier_request(bob, session):
    bob.post(url(session), call_and_result("toolu_a", 1)[:1])
    later = bob.post(url(session), call_and_result("toolu_a", 1)[1:])
    assert later.status_code == 201


def test_too_many_messages(bob, session, settings):
    settings.CTX_MAX_BATCH = 10
    response = bob.post(url(session), [{"role": "user", "content": "x"}] * 11)
    assert response.status_code == 400
    assert response.json()["code"] == "too_many_messages"
    assert Message.objects.filter(session=session).count() == 0


def test_a_batch_of_one_thousand_is_accepted(bob, session):
    response = bob.post(url(session), [{"role": "user", "content": f"m{i}"} for i in range(1000)])
    assert response.status_code == 201
    assert Message.objects.filter(session=session).count() == 1000


def test_oversize_body(bob, session, settings):
    settings.CTX_MAX_BODY_BYTES = 2_000
    response = bob.post(url(session), {"role": "user", "content": "x" * 5_000})
    assert response.status_code == 413
    assert response.json()["code"] == "body_too_large"
    assert Message.objects.filter(session=session).count() == 0


def test_unknown_session(bob):
    for ref in ("987654321", "no-such-external-id", "99999999999999999999999"):
        response = bob.post(f"/api/v1/sessions/{ref}/messages/", {"role": "user", "content": "x"})
        assert response.status_code == 404
        assert response.json()["code"] == "not_found"
    assert Message.objects.count() == 0


def test_handed_off_session_refuses_appends(bob, session):
    AgentSession.objects.filter(pk=session.pk).update(status="handed_off")
    response = bob.post(url(session), {"role": "user", "content": "x"})
    assert response.status_code == 409
    assert response.json()["code"] == "session_closed"


def test_message_list_pages_with_after_seq(bob, session):
    bob.post(url(session), [{"role": "user", "content": f"m{i}"} for i in range(7)])
    page = bob.get(url(session) + "?limit=3").json()
    assert [m["seq"] for m in page["results"]] == [1, 2, 3]
    assert page["count"] == 7
    nxt = bob.get(page["next"]).json()
    assert [m["seq"] for m in nxt["results"]] == [4, 5, 6]
    assert bob.get(url(session) + "?after_seq=6").json()["results"][0]["seq"] == 7
    bad = bob.get(url(session) + "?after_seq=minus")
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_after_seq"


def test_session_create_validates_tools_and_external_id(bob, team):
    bad_tools = bob.post("/api/v1/sessions/", {"project": team.project.pk, "tools": [{"description": "no name"}]})
    assert bad_tools.status_code == 400 and bad_tools.json()["code"] == "invalid_tools"
    ok = bob.post("/api/v1/sessions/", {"project": team.project.pk, "external_id": "cc-1", "context_window": 50_000})
    assert ok.status_code == 201
    dup = bob.post("/api/v1/sessions/", {"project": team.project.pk, "external_id": "cc-1"})
    assert dup.status_code == 409 and dup.json()["code"] == "duplicate_external_id"
    tiny = bob.post("/api/v1/sessions/", {"project": team.project.pk, "context_window": 10})
    assert tiny.status_code == 400 and tiny.json()["detail"].startswith("context_window")
    assert AgentSession.objects.filter(project=team.project).count() == 1


def test_nul_characters_become_replacement_characters(bob, session):
    """Found by the API fuzzer: a NUL in content, client_id or metadata reached PostgreSQL's jsonb,
    which refuses U+0000 (500). A tool's output may hold one; it is stored as U+FFFD instead."""
    body = [
        {"role": "user", "content": "before\x00after", "client_id": "c\x00", "metadata": {"k\x00": ["v\x00"]}},
        {"role": "assistant", "content": [{"type": "text", "text": "\x00"}]},
    ]
    response = bob.post(url(session), body)
    assert response.status_code == 201, response.content
    first, second = Message.objects.filter(session=session).order_by("seq")
    assert (first.content, first.client_id) == ("before\ufffdafter", "c\ufffd")
    assert first.metadata == {"k\ufffd": ["v\ufffd"]}
    assert second.content == [{"type": "text", "text": "\ufffd"}]
    retry = bob.post(url(session), body[:1])  # the same client_id once replaced: stored once
    assert retry.status_code == 201 and Message.objects.filter(session=session).count() == 2


def test_tools_holding_nul_are_refused(bob, team, session):
    for method, path, body in (
        ("post", "/api/v1/sessions/", {"project": team.project.pk, "tools": [{"name": "a\x00"}]}),
        ("patch", f"/api/v1/sessions/{session.pk}/", {"tools": [{"name": "t", "input_schema": {"\x00": {}}}]}),
    ):
        response = getattr(bob, method)(path, body)
        assert response.status_code == 400, response.content
        assert response.json()["code"] == "null_characters_not_allowed"
