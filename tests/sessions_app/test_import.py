"""Importing recorded transcripts: every shared file through `ctx import`, and `POST /sessions/import/`."""

from __future__ import annotations

import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.db.models import Sum

from compaction.transcripts import read_transcript
from sessions_app.models import CONTEXT_STATES, AgentSession, Message
from tests.shared_data import SHARED_DATA

pytestmark = pytest.mark.django_db

DATA = SHARED_DATA
FILES = sorted(
    [("claude-code", p.name) for p in (DATA / "claude_code").glob("*.jsonl")]
    + [("openai", p.name) for p in (DATA / "openai").glob("*") if not p.name.startswith("LICENSE")]
) or [("claude-code", "<shared data missing>")]


def ctx_json(*args: str) -> dict:
    out = io.StringIO()
    call_command("ctx", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def _folder(fmt: str) -> str:
    return "claude_code" if fmt == "claude-code" else "openai"


@pytest.mark.data
@pytest.mark.parametrize(("fmt", "name"), FILES)
def test_every_shared_file_imports(shared_data, team, fmt, name):
    path = shared_data / _folder(fmt) / name
    transcript = read_transcript(path.read_bytes(), fmt)
    result = ctx_json("import", str(path), "--format", fmt, "--project", str(team.project.pk))

    session = AgentSession.objects.get(pk=result["session"])
    stored = Message.objects.filter(session=session)
    main = next(c for c in transcript.conversations if not c.sidechain)
    # every message of the conversation is kept (orphan tool results become text, never dropped)
    assert result["messages"] == stored.count() == len(main.messages) > 0
    assert list(stored.order_by("seq").values_list("seq", flat=True)) == list(range(1, stored.count() + 1))
    # non-message lines are counted, not fatal
    for kind, n in transcript.skipped.items():
        assert result["skipped"][kind] >= n
    # sub-agents land in sessions of their own, not in the main one
    sidechains = [c for c in transcript.conversations if c.sidechain]
    assert len(result["sidechains"]) == len(sidechains)
    for side_id, conv in zip(result["sidechains"], sidechains, strict=True):
        assert Message.objects.filter(session_id=side_id).count() == len(conv.messages)
    # the cached totals are the sum over what the context holds (an automatic run may have summarized some)
    session.refresh_from_db()
    assert session.message_tokens == stored.filter(state__in=CONTEXT_STATES).aggregate(t=Sum("tokens"))["t"]
    assert result["status"]["messages"] > 0


@pytest.mark.data
def test_claude_code_split_assistant_lines_become_one_message_per_response(shared_data, team):
    path = shared_data / "claude_code" / "claude-reliability_coverage-test-fix.jsonl"
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    responses = {e["message"]["id"] for e in events if e.get("type") == "assistant" and not e.get("isSidechain")}
    result = ctx_json("import", str(path), "--format", "claude-code", "--project", "Imports")
    assert Message.objects.filter(session_id=result["session"], role="assistant").count() == len(responses)


@pytest.mark.data
def test_episode_picks_one_conversation_and_a_missing_one_is_a_clear_error(shared_data, team):
    path = shared_data / "openai" / "tau-bench_gpt-4o-airline_episodes-000-039.json"
    episodes = [c for c in read_transcript(path.read_bytes(), "openai").conversations if not c.sidechain]
    result = ctx_json("import", str(path), "--format", "openai", "--episode", "39", "--project", "Tau")
    assert result["messages"] == len(episodes[39].messages)
    with pytest.raises(CommandError, match="Episode 40 doesn't exist"):
        call_command("ctx", "import", str(path), "--format", "openai", "--episode", "40", stdout=io.StringIO())


# ----------------------------------------------------------------------------- REST

CLAUDE_CODE_LINES = "\n".join(
    json.dumps(e)
    for e in [
        {"type": "summary", "summary": "Greeting", "leafUuid": "a1"},
        {
            "type": "user",
            "uuid": "u1",
            "parentUuid": None,
            "sessionId": "cc-1",
            "isSidechain": False,
            "message": {"role": "user", "content": "Say hello"},
        },
        {
            "type": "assistant",
            "uuid": "a1",
            "parentUuid": "u1",
            "sessionId": "cc-1",
            "isSidechain": False,
            "requestId": "req_1",
            "message": {
                "id": "msg_1",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": "Hello!"}],
                "usage": {"input_tokens": 10, "output_tokens": 3},
            },
        },
    ]
).encode()


def upload(name: str = "session.jsonl", content: bytes = CLAUDE_CODE_LINES) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, content, content_type="application/x-ndjson")


def test_member_imports_over_rest(api_as, team):
    response = api_as(team.bob).upload(
        "/api/v1/sessions/import/", {"file": upload(), "format": "claude-code", "project": team.project.pk}
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["messages"] == 2 and body["skipped"] == {"summary": 1}
    session = AgentSession.objects.get(pk=body["session"])
    assert session.project_id == team.project.pk and session.external_id == "cc-1" and session.name == "session"
    assert body["status"]["messages"] > 0


def test_project_may_be_named(api_as, team):
    response = api_as(team.alice).upload(
        "/api/v1/sessions/import/", {"file": upload(), "format": "claude-code", "project": "Alpha"}
    )
    assert response.status_code == 201
    assert response.json()["project"] == team.project.pk


@pytest.mark.parametrize(
    ("persona", "status", "code"), [("carol", 403, "permission_denied"), ("mallory", 404, "not_found")]
)
def test_viewers_and_outsiders_cannot_import(api_as, team, persona, status, code):
    response = api_as(getattr(team, persona)).upload(
        "/api/v1/sessions/import/", {"file": upload(), "format": "claude-code", "project": team.project.pk}
    )
    assert (response.status_code, response.json()["code"]) == (status, code)
    assert not AgentSession.objects.exists()


@pytest.mark.parametrize(
    ("fields", "status", "code"),
    [
        ({"format": "claude-code"}, 400, "required"),  # no file
        ({"file": "x", "format": "yaml"}, 400, "invalid_choice"),
        ({"file": b'{"not": "a transcript"}', "format": "openai"}, 400, "invalid_transcript"),
        ({"file": b"\xff\xfe\x00garbage", "format": "anthropic"}, 400, "invalid_transcript"),
        ({"file": b"", "format": "claude-code"}, 400, "empty"),
    ],
)
def test_bad_uploads_are_refused_and_write_nothing(api_as, team, fields, status, code):
    fields = dict(fields)
    if "file" in fields:
        content = fields["file"] if isinstance(fields["file"], bytes) else fields["file"].encode()
        fields["file"] = upload(content=content)
    response = api_as(team.alice).upload("/api/v1/sessions/import/", {**fields, "project": team.project.pk})
    assert response.status_code == status, response.content
    assert response.json()["code"] == code
    assert not AgentSession.objects.exists() and not Message.objects.exists()


def test_oversize_upload_gets_413(api_as, team, settings):
    settings.CTX_MAX_IMPORT_BYTES = 100
    response = api_as(team.alice).upload(
        "/api/v1/sessions/import/", {"file": upload(), "format": "claude-code", "project": team.project.pk}
    )
    assert (response.status_code, response.json()["code"]) == (413, "body_too_large")
    assert not AgentSession.objects.exists()
