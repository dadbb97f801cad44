"""A project chooses who writes its summaries: a project set to an OpenAI summarizer writes its
checkpoints with it (the fake OpenAI server, through the real SDK) with the project's own sealed key,
the facts intact; the server's key stands in for a project's; without either the offline summarizer
does, and the compaction says so; ``offline`` never calls a model."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import pytest

from sessions_app.models import AgentSession, Checkpoint, Compaction, Project
from sessions_app.selectors import model_context, usage
from sessions_app.services import compaction_runs, projects
from sessions_app.services.summarizers import NO_KEY_NOTE
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI
from tests.sessions_app.compaction_helpers import append
from tests.sessions_app.test_checkpoint_facts import ERROR, REQUESTS, TODOS, result_message, text_of, working_session

pytestmark = pytest.mark.django_db

PROJECT_KEY = "sk-proj-summaries-0042"
NARRATIVE = "Looked around the importer, by GPT."


@pytest.fixture
def fake_openai(settings) -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        settings.OPENAI_API_KEY = ""
        settings.OPENAI_BASE_URL = f"{server.base_url}/v1"
        settings.ANTHROPIC_API_KEY = ""
        yield server


def choose(project: Project, provider: str, model: str) -> None:
    policy = projects.policy_ensure(project=project)
    projects.policy_update(policy=policy, changes={"summarizer_provider": provider, "summarizer_model": model})


def summarize(session: AgentSession) -> Compaction:
    """A summarize run over a session that fills 90 % of its window."""
    used = usage.session_status(session)["used"]
    AgentSession.objects.filter(pk=session.pk).update(context_window_override=math.ceil(used / 0.9))
    session.refresh_from_db()
    record = compaction_runs.compaction_request(session=session, level="summarize", user=None, trigger="auto")
    compaction_runs.compaction_run(record.pk)
    record.refresh_from_db()
    session.refresh_from_db()
    return record


def completions(server: FakeOpenAI) -> list[dict[str, Any]]:
    return [r for r in server.requests if r["path"].endswith("/chat/completions")]


def a_checkpoint_without_facts() -> str:
    return json.dumps({"objective": "Fix an importer bug", "narrative": NARRATIVE})


def test_an_openai_summarizer_writes_the_checkpoint_with_the_projects_key(fake_openai, session_of, team):
    projects.project_provider_key_set(project=team.project, provider="openai", api_key=PROJECT_KEY)
    choose(team.project, "openai", "gpt-4o-mini")
    fake_openai.queue_reply(a_checkpoint_without_facts())
    session = session_of(model="claude-sonnet-4-5", context_window=1_000_000, auto_compact=False)
    append(session, working_session())
    before = model_context.session_context(session)

    record = summarize(session)

    assert record.status == "succeeded", record.error
    assert not any(NO_KEY_NOTE in note for note in record.notes)
    (request,) = completions(fake_openai)
    assert request["headers"]["authorization"] == f"Bearer {PROJECT_KEY}", "the project's own key"
    assert request["body"]["model"] == "gpt-4o-mini"
    checkpoint = Checkpoint.objects.get(session=session)
    assert checkpoint.data["narrative"] == NARRATIVE, "the checkpoint's text came from the OpenAI model"
    assert result_message(session, "run").state == "summarized"
    assert result_message(session, "todo").state == "summarized"
    for fmt in ("anthropic", "openai"):
        context = model_context.session_context(session, fmt=fmt)
        text = text_of(context)
        assert all(request in text for request in REQUESTS), f"{fmt}: a user's message is gone"
        assert all(f"[{item['status']}] {item['content']}" in text for item in TODOS)
        assert "importer/csv.py" in text and ERROR in text
        assert NARRATIVE in text
    assert model_context.session_context(session)["messages"][-3:] == before["messages"][-3:]
    project = Project.objects.get(pk=team.project.pk)
    assert PROJECT_KEY not in project.openai_api_key and project.openai_api_key_hint == "…0042", "sealed"


def test_the_servers_key_stands_in_for_the_projects(fake_openai, settings, session_of, team):
    settings.OPENAI_API_KEY = "sk-server-key-1111"
    choose(team.project, "openai", "gpt-4.1-mini")
    fake_openai.queue_reply(a_checkpoint_without_facts())
    session = session_of(model="gpt-4o", context_window=1_000_000, auto_compact=False)
    append(session, working_session())
    assert summarize(session).status == "succeeded"
    (request,) = completions(fake_openai)
    assert request["headers"]["authorization"] == "Bearer sk-server-key-1111"
    assert request["body"]["model"] == "gpt-4.1-mini"


def test_without_a_key_the_offline_summarizer_stands_in_and_says_so(fake_openai, session_of, team):
    choose(team.project, "openai", "gpt-4o-mini")
    session = session_of(model="gpt-4o", context_window=1_000_000, auto_compact=False)
    append(session, working_session())
    record = summarize(session)
    assert record.status == "succeeded", record.error
    assert completions(fake_openai) == []
    (note,) = [n for n in record.notes if n.startswith(NO_KEY_NOTE)]
    assert "openai:gpt-4o-mini" in note and "OpenAI API key" in note and "offline" in note
    assert Checkpoint.objects.get(session=session).data["facts"]["first_request"] == REQUESTS[0]


def test_offline_never_calls_a_model_even_with_keys(fake_openai, settings, session_of, team):
    settings.OPENAI_API_KEY = "sk-server-key-1111"
    projects.project_provider_key_set(project=team.project, provider="openai", api_key=PROJECT_KEY)
    choose(team.project, "offline", "gpt-4o-mini")
    session = session_of(model="gpt-4o", context_window=1_000_000, auto_compact=False)
    append(session, working_session())
    record = summarize(session)
    assert record.status == "succeeded" and completions(fake_openai) == []
    assert not any(n.startswith(NO_KEY_NOTE) for n in record.notes), "offline is a choice, not a fallback"


def test_an_anthropic_summarizer_uses_the_projects_anthropic_key(settings, session_of, team):
    settings.ANTHROPIC_API_KEY = ""
    projects.project_upstream_key_set(project=team.project, api_key="sk-ant-project-5555")
    with FakeAnthropic(api_key="sk-ant-project-5555") as server:  # any other key: 401
        server.set_reply_function(lambda body: a_checkpoint_without_facts())
        settings.ANTHROPIC_BASE_URL = server.base_url
        session = session_of(model="claude-sonnet-4-5", context_window=1_000_000, auto_compact=False)
        append(session, working_session())
        record = summarize(session)
        assert record.status == "succeeded", record.error
        assert len(server.requests_for("messages")) == 1
    assert Checkpoint.objects.get(session=session).data["narrative"] == NARRATIVE


def test_a_permanent_openai_error_fails_the_run_and_changes_nothing(fake_openai, session_of, team):
    projects.project_provider_key_set(project=team.project, provider="openai", api_key=PROJECT_KEY)
    choose(team.project, "openai", "gpt-4o-mini")
    fake_openai.queue_error(400, "Invalid model")
    session = session_of(model="gpt-4o", context_window=1_000_000, auto_compact=False)
    append(session, working_session())
    record = summarize(session)
    assert record.status == "failed" and "OpenAI API 400" in record.error
    assert not Checkpoint.objects.filter(session=session).exists()
