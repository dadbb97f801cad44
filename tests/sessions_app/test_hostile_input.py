"""Hostile input, item by item: REST input the database or the readers can't hold is a 400 with
``detail`` and ``code`` and writes nothing; recorded files are cleaned instead and import; whatever
was accepted reads back (messages, context in both formats, status)."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from sessions_app.models import AgentSession, IngestRejection, Message, Project, ToolUse

pytestmark = pytest.mark.django_db

DEEP = json.loads("[" * 300 + "]" * 300)
LONE = "cut inside an emoji: \ud83d"


@pytest.fixture
def api(team, api_as):
    return api_as(team.bob)


def counts() -> tuple[int, ...]:
    return (
        Project.objects.count(),
        AgentSession.objects.count(),
        Message.objects.count(),
        ToolUse.objects.count(),
        IngestRejection.objects.count(),
    )


def assert_refused(response, code: str, before: tuple[int, ...], status: int = 400) -> None:
    body = response.json()
    assert (response.status_code, body["code"]) == (status, code), body
    assert body["detail"]
    assert counts() == before, "a refused request wrote something"


def assert_reads_back(api, session_id: int) -> None:
    for path in ("messages/?state=all", "context/?format=anthropic", "context/?format=openai", "status/", ""):
        response = api.get(f"/api/v1/sessions/{session_id}/{path}")
        assert response.status_code == 200, (path, response.content[:300])


def messages_url(session) -> str:
    return f"/api/v1/sessions/{session.pk}/messages/"


# ----------------------------------------------------------------------------- point 2: dates


@pytest.mark.parametrize(
    "created_at",
    [
        "0001-01-01T00:00:00+14:00",  # year 0 in UTC
        "9999-12-31T23:59:59-01:00",  # year 10000 in UTC
        "2025-01-01T00:00:00+16:00",  # PostgreSQL refuses offsets past 15:59
        "2025-01-01T00:00:00+23:59",
        "2025-01-01T00:00:00-14:30",
        "not a date",
    ],
)
def test_an_unstorable_created_at_is_a_400_and_nothing_is_stored(api, session_of, created_at):
    session = session_of()
    before = counts()
    response = api.post(messages_url(session), {"role": "user", "content": "hi", "created_at": created_at})
    assert_refused(response, "invalid_created_at", before)
    assert_reads_back(api, session.pk)


def test_extreme_but_storable_dates_read_back(api, session_of):
    session = session_of()
    for created_at in ("0001-01-03T00:00:00+14:00", "9999-12-29T11:59:59-12:00", "2025-01-01T00:00:00+14:00"):
        assert (
            api.post(messages_url(session), {"role": "user", "content": "x", "created_at": created_at}).status_code
            == 201
        )
    assert_reads_back(api, session.pk)


# ----------------------------------------------------------------------------- point 2: lone surrogates


@pytest.mark.parametrize(
    "message",
    [
        {"role": "user", "content": LONE},
        {"role": "user", "content": [{"type": "text", "text": LONE}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash\ud83d", "input": {}}]},
        {"role": "user", "content": "hi", "metadata": {"key \udc00": 1}},
        {"role": "user", "content": "hi", "client_id": "c\ud800"},
    ],
    ids=["string content", "text block", "tool name", "metadata key", "client_id"],
)
def test_a_lone_surrogate_in_a_message_is_a_400(api, session_of, message):
    session = session_of()
    before = counts()
    assert_refused(api.post(messages_url(session), message), "invalid_unicode", before)


def test_a_lone_surrogate_in_session_fields_is_a_400(api, team):
    before = counts()
    body = {"project": team.project.pk, "name": "s", "tools": [{"name": "t\ud83d", "input_schema": {}}]}
    assert_refused(api.post("/api/v1/sessions/", body), "invalid_unicode", before)
    assert_refused(api.post("/api/v1/sessions/", {"project": team.project.pk, "name": LONE}), "invalid_unicode", before)


@pytest.mark.parametrize(
    ("fmt", "text"),
    [
        ("anthropic", json.dumps({"system": LONE, "messages": [{"role": "user", "content": LONE}]})),
        ("openai", json.dumps([{"role": "user", "content": LONE}, {"role": "assistant", "content": "ok"}])),
        (
            "claude-code",
            json.dumps({"type": "user", "uuid": "u1", "message": {"role": "user", "content": LONE}}) + "\n",
        ),
    ],
)
def test_a_lone_surrogate_in_an_imported_file_is_cleaned_and_counted(api, team, fmt, text):
    upload = SimpleUploadedFile("t.json", text.encode("ascii"))  # json.dumps escapes it: "\ud83d"
    response = api.upload("/api/v1/sessions/import/", {"file": upload, "format": fmt, "project": team.project.pk})
    assert response.status_code == 201, response.content
    assert response.json()["cleaned"]["unicode"] >= 1
    stored = Message.objects.get(session_id=response.json()["session"], seq=1)
    assert "\ufffd" in json.dumps(stored.content, ensure_ascii=False)
    assert_reads_back(api, response.json()["session"])


# ----------------------------------------------------------------------------- point 2: deep nesting


@pytest.mark.parametrize(
    "body",
    [
        {"role": "user", "content": "hi", "metadata": {"deep": DEEP}},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {"a": DEEP}}]},
    ],
    ids=["metadata", "tool input"],
)
def test_deep_json_in_a_message_is_a_400(api, session_of, body):
    session = session_of()
    before = counts()
    assert_refused(api.post(messages_url(session), body), "too_deep", before)


def test_json_too_deep_to_parse_is_a_400(api, session_of):
    session = session_of()
    before = counts()
    raw = '{"role": "user", "content": "x", "metadata": {"a": ' + "[" * 5000 + "]" * 5000 + "}}"
    assert_refused(api.post(messages_url(session), raw), "parse_error", before)


def test_deep_json_in_session_tools_is_a_400(api, team):
    before = counts()
    tools = [{"name": "t", "input_schema": {"type": "object", "properties": {"a": DEEP}}}]
    assert_refused(api.post("/api/v1/sessions/", {"project": team.project.pk, "tools": tools}), "too_deep", before)


def test_deep_json_in_an_imported_file_is_kept_as_text(api, team):
    text = json.dumps(
        [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": {"a": DEEP}}}],
            },
        ]
    )
    upload = SimpleUploadedFile("deep.json", text.encode())
    response = api.upload("/api/v1/sessions/import/", {"file": upload, "format": "openai", "project": team.project.pk})
    assert response.status_code == 201, response.content
    assert response.json()["cleaned"]["too_deep"] >= 1
    assert_reads_back(api, response.json()["session"])


# ----------------------------------------------------------------------------- point 2: import fields


def test_an_import_model_longer_than_the_column_is_a_400(api, team):
    before = counts()
    upload = SimpleUploadedFile("t.json", json.dumps([{"role": "user", "content": "x"}]).encode())
    response = api.upload(
        "/api/v1/sessions/import/", {"file": upload, "format": "openai", "project": team.project.pk, "model": "m" * 101}
    )
    assert response.status_code == 400 and response.json()["code"] and response.json()["detail"]
    assert counts() == before


def test_a_long_file_name_becomes_a_session_name_that_fits(api, team):
    upload = SimpleUploadedFile("n" * 250 + ".json", json.dumps([{"role": "user", "content": "x"}]).encode())
    response = api.upload("/api/v1/sessions/import/", {"file": upload, "format": "openai", "project": team.project.pk})
    assert response.status_code == 201, response.content
    name = AgentSession.objects.get(pk=response.json()["session"]).name
    assert len(name) == 200 and name.startswith("nnn") and name.endswith("…")


def test_nul_and_long_names_in_an_anthropic_file_are_cleaned(api, team):
    text = json.dumps(
        {"model": "claude\x00" + "x" * 200, "system": "be\x00terse", "messages": [{"role": "user", "content": "x"}]}
    )
    upload = SimpleUploadedFile("a.json", text.encode())
    response = api.upload(
        "/api/v1/sessions/import/", {"file": upload, "format": "anthropic", "project": team.project.pk}
    )
    assert response.status_code == 201, response.content
    session = AgentSession.objects.get(pk=response.json()["session"])
    assert session.system_prompt == "be\ufffdterse" and "\x00" not in session.model and len(session.model) <= 100
    assert_reads_back(api, session.pk)


# ----------------------------------------------------------------------------- point 2: count_tokens


@pytest.mark.parametrize(
    ("extra", "code"),
    [
        ({"tools": [5]}, "invalid_tools"),
        ({"tools": [{"name": "a"}, {"name": "a"}]}, "invalid_tools"),
        ({"system": [5, None, {"type": "text"}]}, "invalid_system"),
        ({"system": [{"type": "image"}]}, "invalid_system"),
        ({"system": 5}, "invalid_system"),
    ],
)
def test_count_tokens_refuses_what_anthropic_refuses(api, extra, code):
    body = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}], **extra}
    response = api.post("/api/v1/count_tokens/", body)
    assert (response.status_code, response.json()["code"]) == (400, code)


def test_count_tokens_caps_the_number_of_messages(api, settings):
    settings.CTX_MAX_COUNT_MESSAGES = 50
    body = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "x"}] * 51}
    response = api.post("/api/v1/count_tokens/", body)
    assert (response.status_code, response.json()["code"]) == (400, "too_many_messages")
    body["messages"] = body["messages"][:50]
    assert api.post("/api/v1/count_tokens/", body).status_code == 200


# ----------------------------------------------------------------------------- point 3


def test_a_tool_use_id_twice_in_one_message_is_a_400(api, session_of):
    session = session_of()
    before = counts()
    call = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}
    response = api.post(messages_url(session), {"role": "assistant", "content": [call, call]})
    assert_refused(response, "duplicate_tool_use_id", before)


def test_a_tool_use_id_the_session_has_is_a_400(api, session_of):
    session = session_of()
    call = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]}
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}
    assert api.post(messages_url(session), [{"role": "user", "content": "go"}, call, result]).status_code == 201
    before = counts()
    assert_refused(api.post(messages_url(session), [call, result]), "duplicate_tool_use_id", before)
    assert_refused(
        api.post(messages_url(session), [{"role": "user", "content": "x"}, call]), "duplicate_tool_use_id", before
    )
    context = api.get(f"/api/v1/sessions/{session.pk}/context/").json()["messages"]
    ids = [b["id"] for m in context for b in m["content"] if b["type"] == "tool_use"]
    assert ids == ["t1"]


def test_a_chunked_body_is_a_411_not_a_misleading_400(team, session_of):
    session = session_of()
    before = counts()
    client = Client()
    response = client.post(
        messages_url(session),
        data=b"",
        content_type="application/json",
        HTTP_TRANSFER_ENCODING="chunked",
        HTTP_AUTHORIZATION=f"Bearer {team.bob.key}",
        CONTENT_LENGTH="",
    )
    assert_refused(response, "length_required", before, status=411)
    assert "Content-Length" in response.json()["detail"]


def test_a_retried_client_id_with_another_body_answers_the_stored_message_flagged(api, session_of):
    session = session_of()
    first = api.post(messages_url(session), {"role": "user", "content": "first", "client_id": "m1"}).json()
    assert first["messages"][0]["mismatch"] is False
    same = api.post(messages_url(session), {"role": "user", "content": "first", "client_id": "m1"}).json()
    assert same["messages"][0]["mismatch"] is False
    other = api.post(messages_url(session), {"role": "user", "content": "second", "client_id": "m1"})
    assert other.status_code == 201
    answer = other.json()["messages"][0]
    assert (answer["mismatch"], answer["content"], answer["id"]) == (True, "first", first["messages"][0]["id"])
    assert Message.objects.filter(session=session).count() == 1


# ----------------------------------------------------------------------------- the CLI


@pytest.mark.parametrize(
    "stdin",
    [
        "[" * 3000 + "]" * 3000,
        json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [5]}),
        json.dumps(
            {"model": "m", "messages": [{"role": "user", "content": "x", "created_at": "0001-01-01T00:00:00+14:00"}]}
        ),
        '{"model": "m", "messages": [{"role": "user", "content": "\\ud83d"}]}',
    ],
    ids=["deep", "tools", "timestamp", "surrogate"],
)
def test_ctx_count_errors_are_one_command_error_line(monkeypatch, stdin):
    import io

    from django.core.management import CommandError, call_command

    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    with pytest.raises(CommandError) as caught:
        call_command("ctx", "count")
    assert "\n" not in str(caught.value) and str(caught.value)


def test_huge_numbers_read_back_as_the_same_numbers(api, session_of):
    """jsonb keeps exact decimals: a float past 2**53 would read back as another number, so it is stored
    as the integer it is."""
    session = session_of()
    numbers = [-5.332568515768396e80, 1.2172840000000001e16, 1.7976931348623157e308, 2**80, -(2**70), 0.1, -0.0, 5e-324]
    call = {"type": "tool_use", "id": "t1", "name": "calc", "input": {"numbers": numbers}}
    assert api.post(messages_url(session), {"role": "assistant", "content": [call]}).status_code == 201
    stored = api.get(f"/api/v1/sessions/{session.pk}/messages/").json()["results"][0]["content"][0]["input"]["numbers"]
    assert stored == numbers
    assert Message.objects.get(session=session).content[0]["input"]["numbers"] == numbers


@pytest.mark.parametrize(
    ("arguments", "code"),
    [('{"a": "\\ud83d"}', "invalid_unicode"), ('{"a": ' + "[" * 100 + "]" * 100 + "}", "too_deep")],
    ids=["surrogate", "deep"],
)
def test_openai_tool_call_arguments_are_checked_like_the_body(api, session_of, arguments, code):
    session = session_of()
    before = counts()
    message = {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": arguments}}]}
    assert_refused(api.post(messages_url(session), message), code, before)


def test_nul_in_openai_tool_call_arguments_is_replaced_as_in_content(api, session_of):
    session = session_of()
    message = {
        "role": "assistant",
        "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": '{"a": "x\\u0000y"}'}}],
    }
    assert api.post(messages_url(session), message).status_code == 201
    assert Message.objects.get(session=session).content[0]["input"] == {"a": "x\ufffdy"}
    assert_reads_back(api, session.pk)


def test_a_tool_use_id_longer_than_the_index_column_is_a_400(api, session_of):
    session = session_of()
    before = counts()
    call = {"type": "tool_use", "id": "c" * 256, "name": "Bash", "input": {}}
    assert_refused(api.post(messages_url(session), {"role": "assistant", "content": [call]}), "invalid_content", before)
