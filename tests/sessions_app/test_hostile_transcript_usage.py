"""Hostile ``usage`` in Claude Code transcripts (``services.transcript_usage``): figures that are
negative, huge, floats, strings, booleans, nested or missing; responses without ids; message ids shared
by sub-agents; a response id another session or project uses too; a line whose usage changes between
uploads. Whatever is stored reads back (REST rows, CSV, spend, STATUS, the session page) and a figure
no request can have is 0, never a row that breaks a later read."""

from __future__ import annotations

import csv
import io
import json
import warnings
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.transcripts import read_transcript
from sessions_app.models import AgentSession, ProviderRequest
from sessions_app.selectors.usage import session_status
from sessions_app.services import importing, projects, transcript_sync
from sessions_app.services.provider_usage import MAX_TOKENS
from tests.hypothesis_budget import DATABASE

pytestmark = pytest.mark.django_db

KINDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
HOSTILE_FIGURES: list[Any] = [
    -1,
    -(10**12),
    0,
    1,
    MAX_TOKENS,
    MAX_TOKENS + 1,
    10**30,
    2**63,
    1.5,
    1e308,
    float("nan"),
    float("inf"),
    "100",
    "",
    "\x00",
    True,
    False,
    None,
    [100],
    {"tokens": 100},
]
FIGURE = st.one_of(st.sampled_from(HOSTILE_FIGURES), st.integers(-(2**70), 2**70), st.integers(1, 50_000))


def believed(value: Any) -> int:
    """What a figure counts as: a whole number of tokens any request can use, else 0."""
    return value if type(value) is int and 0 < value <= MAX_TOKENS else 0


class Lines:
    def __init__(self, session: str = "cc-hostile") -> None:
        self.session, self.n = session, 0
        self.lines: list[str] = []

    def event(self, kind: str, message: dict[str, Any], *, sidechain: bool = False, **extra: Any) -> None:
        self.n += 1
        event = {
            "type": kind,
            "uuid": f"{self.session}-u{self.n}",
            "parentUuid": f"{self.session}-u{self.n - 1}" if self.n > 1 else None,
            "sessionId": self.session,
            "isSidechain": sidechain,
            "timestamp": f"2025-06-01T10:{self.n // 60:02d}:{self.n % 60:02d}Z",
            "message": message,
            **extra,
        }
        if sidechain:
            event["agentId"] = "sub1"
        self.lines.append(json.dumps(event, ensure_ascii=False, allow_nan=True) + "\n")

    def prompt(self, text: str, **kw: Any) -> None:
        self.event("user", {"role": "user", "content": text}, **kw)

    def reply(self, message_id: Any, usage: Any, text: str = "ok", model: Any = "claude-sonnet-4-5", **kw: Any) -> None:
        body = {"role": "assistant", "model": model, "content": [{"type": "text", "text": text}], "usage": usage}
        if message_id is not None:
            body["id"] = message_id
        self.event("assistant", body, **kw)

    def data(self) -> bytes:
        return "".join(self.lines).encode()


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user(username="hostile-usage", password="x-pass-123")


def _project(user: Any, name: str) -> Any:
    project = projects.project_create(user=user, name=name)
    project.policy.auto = False
    project.policy.save()
    return project


def _import(user: Any, project: Any, data: bytes) -> AgentSession:
    return importing.session_import(user=user, project=project, transcript=read_transcript(data, "claude-code")).session


def _reads_back(client: Any, user: Any, session: AgentSession) -> None:
    """Every surface that shows the session's figures answers (no 500) and agrees with the rows."""
    client.force_login(user)
    rows = list(ProviderRequest.objects.filter(session=session).values(*KINDS))
    for path in (
        f"/api/v1/sessions/{session.pk}/requests/",
        f"/api/v1/sessions/{session.pk}/spend/?sub_agents=true",
        f"/api/v1/sessions/{session.pk}/tools/",
        f"/api/v1/sessions/{session.pk}/status/",
        f"/api/v1/projects/{session.project_id}/spend/?by=model",
        f"/api/v1/projects/{session.project_id}/dashboard/",
        f"/sessions/{session.pk}/",
        f"/projects/{session.project_id}/",
    ):
        response = client.get(path)
        assert response.status_code == 200, (path, response.content[:300])
    spend = client.get(f"/api/v1/sessions/{session.pk}/spend/").json()
    for kind in KINDS:
        assert spend[kind] == sum(r[kind] for r in rows)
    response = client.get(f"/api/v1/sessions/{session.pk}/requests/?format=csv")
    table = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert len(table) == len(rows)
    status = client.get(f"/api/v1/sessions/{session.pk}/status/").json()
    assert status["used"] >= 0 and status["token_source"] in ("exact", "estimate")
    assert status["used"] <= max(status["context_window"], 10**8)


@settings(DATABASE)
@given(first=st.fixed_dictionaries({k: FIGURE for k in KINDS}), last=st.fixed_dictionaries({k: FIGURE for k in KINDS}))
def test_hostile_figures_count_zero_and_read_back(owner, client, first, last):
    lines = Lines()
    lines.prompt("hello")
    lines.reply("msg_a", first, "first")
    lines.prompt("again")
    lines.reply("msg_b", {**last, "service_tier": {"nested": True}}, "second")
    project = _project(owner, f"figures {len(AgentSession.objects.all())}")
    session = _import(owner, project, lines.data())

    stored = {
        r["model"]: r for r in ProviderRequest.objects.filter(session=session).values("model", "service_tier", *KINDS)
    }
    rows = sorted(ProviderRequest.objects.filter(session=session).values_list(*KINDS))
    assert rows == sorted(tuple(believed(u[k]) for k in KINDS) for u in (first, last))
    assert {r["service_tier"] for r in stored.values()} <= {""}
    read = sum(believed(last[k]) for k in KINDS[:3])
    status = session_status(AgentSession.objects.get(pk=session.pk))
    if status["token_source"] == "exact":
        assert status["used"] == read
    _reads_back(client, owner, session)


@pytest.mark.parametrize("usage", [[], "usage", 7, None, {"input_tokens": {"$gt": 0}}, {}])
def test_usage_that_is_no_object_or_empty_writes_no_figures(owner, client, usage):
    lines = Lines()
    lines.prompt("hi")
    lines.reply("msg_x", usage)
    session = _import(owner, _project(owner, "shapes"), lines.data())
    assert all(
        figures == (0, 0, 0, 0) for figures in ProviderRequest.objects.filter(session=session).values_list(*KINDS)
    )
    assert session_status(AgentSession.objects.get(pk=session.pk))["token_source"] == "estimate"
    _reads_back(client, owner, session)


@pytest.mark.parametrize("message_id", [None, "", 0, 17, ["a"], {"id": "x"}, True, "\x00", "x" * 5000, "🙂\u202e"])
def test_odd_response_ids_store_readable_rows_or_none(owner, client, message_id):
    lines = Lines()
    lines.prompt("hi")
    lines.reply(message_id, {"input_tokens": 1234, "output_tokens": 5})
    session = _import(owner, _project(owner, f"ids {message_id!r}"[:100]), lines.data())
    rows = list(ProviderRequest.objects.filter(session=session).values_list("input_tokens", flat=True))
    assert rows in ([], [1234])
    _reads_back(client, owner, session)


@pytest.mark.parametrize(
    "model", ["\x00", "<script>alert(1)</script>", "=cmd|' /C calc'!A0", "m" * 5000, "\u202eرسالة", 42, None, ["x"]]
)
def test_hostile_model_names_store_and_read_back(owner, client, model):
    lines = Lines()
    lines.prompt("hi")
    lines.reply("msg_m", {"input_tokens": 50, "output_tokens": 5}, model=model)
    session = _import(owner, _project(owner, f"model {str(model)[:20]!r}"), lines.data())
    models = list(ProviderRequest.objects.filter(session=session).values_list("model", flat=True))
    assert len(models) == 1 and len(models[0]) <= 200 and "\x00" not in models[0]
    _reads_back(client, owner, session)
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert "<script>alert(1)</script>" not in page


def test_a_message_id_the_sub_agent_reuses_is_its_own_row(owner, client):
    lines = Lines()
    lines.prompt("main task")
    lines.reply("msg_same", {"input_tokens": 1000, "output_tokens": 10}, "main")
    lines.prompt("sub task", sidechain=True)
    lines.reply("msg_same", {"input_tokens": 7, "output_tokens": 3}, "sub", sidechain=True)
    lines.prompt("main again")
    lines.reply("msg_main_2", {"input_tokens": 1200, "output_tokens": 10}, "main 2")
    project = _project(owner, "sub-agents")
    result = importing.session_import(
        user=owner, project=project, transcript=read_transcript(lines.data(), "claude-code")
    )
    figures = sorted(ProviderRequest.objects.filter(project=project).values_list("input_tokens", "output_tokens"))
    assert figures == [(7, 3), (1000, 10), (1200, 10)]
    main = result.session
    assert session_status(AgentSession.objects.get(pk=main.pk))["used"] in (1200, session_status(main)["used"])
    for session in AgentSession.objects.filter(project=project):
        _reads_back(client, owner, session)


def test_a_response_id_another_project_uses_too_changes_nothing_there(owner, client, django_user_model):
    mallory = django_user_model.objects.create_user(username="mallory-usage", password="x-pass-123")
    lines = Lines()
    lines.prompt("hi")
    lines.reply("msg_shared", {"input_tokens": 4000, "output_tokens": 40})
    alice_project = _project(owner, "alice's")
    alices = _import(owner, alice_project, lines.data())

    theirs = Lines()
    theirs.prompt("hi")
    theirs.reply("msg_shared", {"input_tokens": 9, "output_tokens": 9, "cache_read_input_tokens": 999_999})
    mallory_project = _project(mallory, "mallory's")
    _import(mallory, mallory_project, theirs.data())
    synced = _project(mallory, "mallory's hook")  # the same file again, as the hook's uploads
    transcript_sync.transcript_sync(
        user=mallory, project=synced, external_id="cc-hostile", offset=0, lines=theirs.data().decode(), final=True
    )
    assert ProviderRequest.objects.filter(project__in=[mallory_project, synced]).count() == 2

    mine = list(ProviderRequest.objects.filter(session=alices).values_list("input_tokens", "output_tokens", "project"))
    assert mine == [(4000, 40, alice_project.pk)]
    assert not ProviderRequest.objects.filter(project=mallory_project, session__project=alice_project).exists()
    assert not ProviderRequest.objects.filter(project=alice_project).exclude(session=alices).exists()
    _reads_back(client, owner, alices)


def test_usage_that_changes_between_uploads_ends_as_the_last_upload_says(owner, client):
    project = _project(owner, "uploads")
    first, changed = Lines(), Lines()
    for lines, figure in ((first, 3000), (changed, 3500)):
        lines.prompt("hi")
        lines.reply("msg_grow", {"input_tokens": figure, "output_tokens": 5}, "part one")
    changed.reply("msg_grow", {"input_tokens": 2**80, "output_tokens": -5}, "part two")  # a later hostile line
    data_one, data_two = first.data(), changed.data()
    held = transcript_sync.transcript_sync(
        user=owner, project=project, external_id="cc", offset=0, lines=data_one.decode()
    ).offset
    tail = data_two[len(b"".join(line.encode() for line in changed.lines[:2])) :]
    transcript_sync.transcript_sync(
        user=owner, project=project, external_id="cc", offset=held, lines=tail.decode(), final=True
    )
    session = AgentSession.objects.get(project=project, external_id="cc")
    rows = list(ProviderRequest.objects.filter(session=session).values_list("input_tokens", "output_tokens"))
    assert rows == [(0, 0)]  # the newest line's figures, hostile ones counting 0
    status = session_status(session)
    assert status["token_source"] == "estimate"  # a reply that read nothing gives no exact count
    _reads_back(client, owner, session)


@pytest.mark.parametrize(
    "stamp, expected",
    [
        ("2025-06-01T10:00:00", datetime(2025, 6, 1, 10, 0, tzinfo=UTC)),  # no offset: UTC, as messages take it
        ("2025-06-01T12:00:00+02:00", datetime(2025, 6, 1, 10, 0, tzinfo=UTC)),
        ("2025-06-01", datetime(2025, 6, 1, 0, 0, tzinfo=UTC)),
    ],
)
def test_a_response_time_without_an_offset_is_utc_and_warns_nothing(owner, stamp, expected):
    lines = Lines()
    lines.prompt("hi", timestamp=stamp)
    lines.reply("msg_t", {"input_tokens": 100, "output_tokens": 5}, timestamp=stamp)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # Django's "received a naive datetime"
        session = _import(owner, _project(owner, f"stamp {stamp}"), lines.data())
    row = ProviderRequest.objects.get(session=session)
    assert row.created_at == expected
    assert session.messages.order_by("-seq").first().created_at == row.created_at


FIGURES = ("token_source", "used", "messages", "warnings")


@pytest.mark.parametrize(
    "late_usage",
    [
        {"input_tokens": 0, "output_tokens": 0},  # a figure that no longer applies
        {"input_tokens": "3000"},
        {"input_tokens": 90_000_000, "output_tokens": 1},  # past the window: not believed
        {"input_tokens": 3200, "output_tokens": 9},  # a believable change
    ],
)
@pytest.mark.parametrize("late_content", [[], [{"type": "text", "text": "and more"}]])
def test_a_late_line_that_changes_a_responses_usage_ends_as_the_import_does(owner, late_usage, late_content):
    lines = Lines()
    lines.prompt("hi " * 200)
    lines.reply("msg_late", {"input_tokens": 3000, "output_tokens": 5}, "part one")
    body = {"id": "msg_late", "role": "assistant", "model": "claude-sonnet-4-5", "content": late_content}
    lines.event("assistant", {**body, "usage": late_usage})
    data = lines.data()
    first_upload = "".join(lines.lines[:2])

    streamed = _project(owner, "late streamed")
    held = transcript_sync.transcript_sync(
        user=owner, project=streamed, external_id="cc", offset=0, lines=first_upload, final=True
    ).offset
    transcript_sync.transcript_sync(
        user=owner, project=streamed, external_id="cc", offset=held, lines=data[held:].decode(), final=True
    )
    imported = _import(owner, _project(owner, "late imported"), data)

    chunked = session_status(AgentSession.objects.get(project=streamed, external_id="cc"))
    whole = session_status(AgentSession.objects.get(pk=imported.pk))
    assert {k: chunked[k] for k in FIGURES} == {k: whole[k] for k in FIGURES}
    rows = ProviderRequest.objects.filter(project=streamed).values_list(*KINDS)
    assert list(rows) == list(ProviderRequest.objects.filter(session=imported).values_list(*KINDS))
