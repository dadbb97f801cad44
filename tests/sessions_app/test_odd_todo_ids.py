"""A todo id such as "²" (``str.isdigit`` holds, ``int()`` refuses) reaches every path that reads the
session's facts: the API's dry run, the web preview, the handoff, and the service the worker runs.
Each answers as for any other session, and the todo list keeps the id as the agent wrote it."""

from __future__ import annotations

import pytest
from django.urls import reverse

from sessions_app.models import Checkpoint
from sessions_app.services import compaction_runs
from tests.sessions_app.compaction_helpers import agent_rounds, append

pytestmark = pytest.mark.django_db

ODD_TODOS = [
    {"role": "user", "content": "Track the work in a todo list."},
    {
        "role": "assistant",
        "content": [
            {
                "type": "tool_use",
                "id": "todo1",
                "name": "TodoWrite",
                "input": {
                    "todos": [
                        {"id": "²", "content": "Square the numbers", "status": "in_progress"},
                        {"id": "①", "content": "Circle back", "status": "pending"},
                    ]
                },
            }
        ],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "todo1", "content": "Todos updated."}]},
    {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "task1", "name": "TaskCreate", "input": {"subject": "Ship"}}],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "task1", "content": "Task #³ created."}]},
    {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "task2", "name": "TaskCreate", "input": {"subject": "Tag"}}],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "task2", "content": "Created."}]},
]


@pytest.fixture
def odd(session_of):
    session = session_of(model="claude-sonnet-4-5", context_window=30_000, auto_compact=False)
    append(session, ODD_TODOS)
    append(session, agent_rounds(24))
    return session


def test_the_api_dry_run_summarizes(odd, api_as, team):
    response = api_as(team.bob).post(f"/api/v1/sessions/{odd.pk}/compactions/", {"level": "summarize", "dry_run": True})
    assert response.status_code == 200, response.content
    assert response.json()["dry_run"] is True


def test_the_web_preview_summarizes(odd, client, team):
    client.force_login(team.bob.user)
    response = client.post(reverse("web:compaction-preview", args=[odd.pk]), {"level": "summarize"})
    assert response.status_code == 200
    assert "Square the numbers" in response.content.decode()


def test_the_handoff_is_written_with_the_todos_as_written(odd, api_as, team):
    response = api_as(team.bob).post(f"/api/v1/sessions/{odd.pk}/handoff/", {"continue": True})
    assert response.status_code == 201, response.content
    text = response.json()["text"]
    assert "[in_progress] Square the numbers" in text and "[pending] Tag" in text


def test_the_worker_summarizes_and_numbers_the_next_task_after_the_plain_ones(odd, team):
    record = compaction_runs.compaction_request(session=odd, level="summarize", user=team.bob.user)
    assert compaction_runs.compaction_run(record.pk) == "succeeded"
    todos = Checkpoint.objects.get(session=odd).data["facts"]["todos"]
    assert [(t.get("id"), t["content"]) for t in todos] == [
        ("²", "Square the numbers"),
        ("①", "Circle back"),
        ("³", "Ship"),
        ("1", "Tag"),
    ]
