"""`python manage.py ctx …` — JSON output is one object on stdout, nothing else."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from sessions_app.models import ApiKey
from sessions_app.services import ingest

pytestmark = pytest.mark.django_db


def ctx(*args: str, stdin: str | None = None, monkeypatch=None) -> str:
    out = io.StringIO()
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    call_command("ctx", *args, stdout=out)
    return out.getvalue()


REQUESTS = [
    {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "Hello, Claude"}]},
    {
        "model": "claude-sonnet-4-5",
        "system": "You are a pirate.",
        "tools": [
            {
                "name": "get_weather",
                "description": "Weather",
                "input_schema": {"type": "object", "properties": {"location": {"type": "string"}}},
            }
        ],
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"location": "Paris"}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "sunny"}]},
        ],
    },
    {"model": "gpt-4o", "messages": [{"role": "user", "content": [{"type": "text", "text": "x " * 500}]}]},
]


def test_ctx_count_agrees_with_the_rest_endpoint(team, api_as, monkeypatch):
    cli = json.loads(ctx("count", stdin=json.dumps(REQUESTS), monkeypatch=monkeypatch))
    api = [api_as(team.carol).post("/api/v1/count_tokens/", body).json() for body in REQUESTS]
    assert [c["input_tokens"] for c in cli] == [a["input_tokens"] for a in api]
    assert all(a["source"] == "estimate" for a in api)
    assert cli[1]["input_tokens"] > cli[0]["input_tokens"]
    single = json.loads(ctx("count", stdin=json.dumps(REQUESTS[0]), monkeypatch=monkeypatch))
    assert single == {"input_tokens": cli[0]["input_tokens"]}


def test_count_endpoint_refuses_bad_bodies(team, api_as):
    for body, code in [
        ({"messages": [{"role": "user", "content": "x"}]}, "invalid_model"),
        ({"model": "m", "messages": []}, "invalid_messages"),
        ({"model": "m", "messages": [{"role": "nobody", "content": "x"}]}, "invalid_role"),
    ]:
        response = api_as(team.carol).post("/api/v1/count_tokens/", body)
        assert response.status_code == 400
        assert response.json()["code"] == code


def test_apikey_prints_a_working_key_once(client, team):
    raw = ctx("apikey", "carol").strip()
    assert raw.startswith("ctx_") and "\n" not in raw
    assert client.get("/api/v1/projects/", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 200
    stored = ApiKey.objects.filter(user=team.carol.user).order_by("-created_at").first()
    assert stored.key_hash != raw
    data = json.loads(ctx("apikey", "newbie", "--create-user", "--json"))
    assert set(data) == {"user", "key", "prefix"} and data["user"] == "newbie"
    with pytest.raises(CommandError, match="create-user"):
        ctx("apikey", "nobody-here")


def test_demo_loads_once_and_status_json_matches_api(team, api_as):
    first = json.loads(ctx("demo", "--json"))
    again = json.loads(ctx("demo", "--json"))
    assert first["created"] is True and again["created"] is False
    assert first["sessions"] == again["sessions"] and len(first["sessions"]) >= 3
    from django.contrib.auth import get_user_model

    demo_user = get_user_model().objects.get(username=first["username"])
    assert demo_user.check_password(first["password"])
    sid = str(first["sessions"][1])
    status = json.loads(ctx("status", sid, "--json"))
    assert status["level"] in ("ok", "remind", "compact", "summarize", "handoff")
    human = ctx("status", sid)
    assert "Messages:" in human and "⛁" in human


def test_context_command_prints_a_request(session_of):
    from compaction.messages import normalize_message

    session = session_of(external_id="ext-1", system_prompt="sys")
    ingest.message_append(session=session, messages=[normalize_message({"role": "user", "content": "hi"})])
    body = json.loads(ctx("context", "ext-1"))
    assert body["system"] == "sys" and body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    ]
    with pytest.raises(CommandError):
        ctx("status", "does-not-exist")


@pytest.fixture
def busy_session(session_of):
    from tests.sessions_app.compaction_helpers import agent_rounds, append

    session = session_of(model="claude-sonnet-4-5", context_window=30_000, auto_compact=False, external_id="ext-busy")
    append(session, agent_rounds(24))
    return session


def test_compact_dry_run_writes_nothing_then_compact_and_revert_by_external_id(busy_session):
    from tests.sessions_app.compaction_helpers import rows_of

    rows = rows_of(busy_session)
    preview = json.loads(ctx("compact", "ext-busy", "--dry-run", "--json"))
    assert preview["dry_run"] is True and preview["saved_tokens"] > 0
    assert rows_of(busy_session) == rows
    human = ctx("compact", "ext-busy", "--dry-run")
    assert "Dry run of compact" in human and "tool_output" in human

    done = json.loads(ctx("compact", "ext-busy", "--json"))
    assert done["status"] == "succeeded" and done["saved_tokens"] == preview["saved_tokens"]
    assert rows_of(busy_session) != rows
    reverted = json.loads(ctx("compact", "ext-busy", "--revert", "--json"))
    assert (reverted["id"], reverted["status"]) == (done["id"], "reverted")
    assert rows_of(busy_session) == rows
    with pytest.raises(CommandError, match="No compaction"):
        ctx("compact", "ext-busy", "--revert")


def test_summarize_then_context_starts_with_the_summary(busy_session):
    done = json.loads(ctx("compact", str(busy_session.pk), "--level", "summarize", "--json"))
    assert done["status"] == "succeeded"
    context = json.loads(ctx("context", str(busy_session.pk)))
    first = context["messages"][0]["content"][0]["text"]
    assert first.startswith("<context_summary>") and context["status"]["usage_percent"] < 50


def test_handoff_writes_the_document_and_continues(busy_session, tmp_path):
    target = tmp_path / "handoff.md"
    out = json.loads(ctx("handoff", "ext-busy", "-o", str(target), "--format", "md", "--continue", "--json"))
    body = target.read_text()
    assert body.startswith("# Handoff") and "## Next Steps" in body
    assert out["continuation"] and out["output"] == str(target)
    busy_session.refresh_from_db()
    assert busy_session.status == "handed_off"
    text = ctx("handoff", str(out["continuation"]))
    assert "HANDOFF DOCUMENT" in text and "CURRENT TASK" in text
