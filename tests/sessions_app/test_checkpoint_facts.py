"""After a summary, the context an agent receives still holds what it needs to go on — the first
request and every message the user typed verbatim, the latest todo list with its statuses, the files
it modified, the open errors, the newest three messages — whether the offline summarizer wrote the
checkpoint or a model whose reply leaves all of that out."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from sessions_app.models import AgentSession, Checkpoint, Message
from sessions_app.selectors import model_context, usage
from sessions_app.services import compaction_runs
from tests.fakes.anthropic_server import FakeAnthropic
from tests.sessions_app.compaction_helpers import append, log_output

pytestmark = pytest.mark.django_db

TODOS = [
    {"content": "Reproduce the crash", "status": "completed", "activeForm": "Reproducing"},
    {"content": "Fix the CSV reader", "status": "in_progress", "activeForm": "Fixing"},
    {"content": "Add a regression test", "status": "pending", "activeForm": "Adding"},
]
REQUESTS = [
    "The importer crashes on files with a BOM.\nFix it in importer/csv.py, keep the API as is.",
    "Also: do not touch the legacy loader.",
    "Use `make test`, not pytest directly.",
]
ERROR = "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xef in position 0"


def call(tid: str, name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": name, "input": args}


def result(tid: str, content: str, **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tid, "content": content, **extra}


def working_session() -> list[dict[str, Any]]:
    import random

    rng = random.Random(4)
    out: list[dict[str, Any]] = []
    for i, request in enumerate(REQUESTS):
        out.append({"role": "user", "content": request})
        for step in range(5):
            tid = f"t{i}_{step}"
            out.append({"role": "assistant", "content": [call(tid, "Read", file_path=f"importer/part_{step}.py")]})
            out.append({"role": "user", "content": [result(tid, log_output(rng, 60))]})
    out += [
        {"role": "assistant", "content": [call("todo", "TodoWrite", todos=TODOS)]},
        {"role": "user", "content": [result("todo", "Todos have been modified successfully.")]},
        {"role": "assistant", "content": [call("edit", "Edit", file_path="importer/csv.py", old_string="a")]},
        {"role": "user", "content": [result("edit", "The file importer/csv.py has been updated.")]},
        {"role": "assistant", "content": [call("run", "Bash", command="make test")]},
        {"role": "user", "content": [result("run", f"Exit code 2\n{log_output(rng, 40)}\n{ERROR}", is_error=True)]},
    ]
    for step in range(16):  # more reading after the failure: the failing run ends up in the head
        tid = f"late_{step}"
        out.append({"role": "assistant", "content": [call(tid, "Grep", pattern=f"bom_{step}")]})
        out.append({"role": "user", "content": [result(tid, log_output(rng, 60))]})
    out += [
        {"role": "assistant", "content": "The reader opens files without utf-8-sig; changing that next."},
        {"role": "user", "content": "Go ahead."},
        {"role": "assistant", "content": [call("last", "Read", file_path="importer/csv.py")]},
    ]
    return out


def checkpoint_without_facts(body: Any) -> str:
    """A model that writes a fine narrative and forgets everything the facts hold."""
    return json.dumps({"objective": "Fix an importer bug", "narrative": "Looked around the importer."})


def text_of(context: dict[str, Any]) -> str:
    parts = []
    for m in context["messages"]:
        content = m.get("content")
        if isinstance(content, str):
            parts.append(content)
            continue
        for block in content or []:
            if block.get("type") == "text":
                parts.append(block["text"])
            elif block.get("type") == "tool_result":
                inner = block.get("content")
                parts.append(inner if isinstance(inner, str) else json.dumps(inner))
            elif block.get("type") == "tool_use":
                parts.append(json.dumps(block.get("input")))
    return "\n".join(parts)


@pytest.fixture(params=["offline", "model"])
def summarizer(request, settings):
    if request.param == "offline":
        settings.ANTHROPIC_API_KEY = ""
        yield request.param
        return
    with FakeAnthropic() as server:
        server.set_reply_function(checkpoint_without_facts)
        settings.ANTHROPIC_API_KEY = "test-key"
        settings.ANTHROPIC_BASE_URL = server.base_url
        settings.ANTHROPIC_MAX_RETRIES = 0
        yield request.param


def result_message(session, tool_use_id: str) -> Message:
    """The one stored message holding the result of that tool call (read in Python: SQLite has no JSON
    containment lookup)."""
    (found,) = (
        m
        for m in Message.objects.filter(session=session)
        if isinstance(m.content, list)
        and any(isinstance(b, dict) and b.get("tool_use_id") == tool_use_id for b in m.content)
    )
    return found


def test_a_summary_keeps_what_the_agent_needs_to_go_on(session_of, summarizer, team, client):
    session = session_of(model="claude-sonnet-4-5", context_window=1_000_000, auto_compact=False)
    append(session, working_session())
    used = usage.session_status(session)["used"]
    AgentSession.objects.filter(pk=session.pk).update(context_window_override=math.ceil(used / 0.9))
    session.refresh_from_db()
    before = model_context.session_context(session)

    record = compaction_runs.compaction_request(session=session, level="summarize", user=None, trigger="auto")
    compaction_runs.compaction_run(record.pk)
    record.refresh_from_db()
    session.refresh_from_db()
    assert record.status == "succeeded", record.error
    checkpoint = Checkpoint.objects.get(session=session)
    if summarizer == "model":
        assert checkpoint.data["narrative"] == "Looked around the importer.", "the model's reply was used"
    failing = result_message(session, "run")
    assert failing.state == "summarized", "the failing run is in what the checkpoint replaced"
    todo = result_message(session, "todo")
    assert todo.state == "summarized"

    for fmt in ("anthropic", "openai"):
        context = model_context.session_context(session, fmt=fmt)
        text = text_of(context)
        for request in REQUESTS:
            assert request in text, f"{fmt}: a user's message is gone"
        for item in TODOS:
            assert f"[{item['status']}] {item['content']}" in text
        assert "importer/csv.py" in text
        assert ERROR in text, "the unresolved error"
        assert context["status"]["usage_percent"] <= 50.0 + 0.01
    after = model_context.session_context(session)
    assert after["messages"][-3:] == before["messages"][-3:], "the newest three messages are untouched"

    # And a person reading the session page sees the same facts.
    client.force_login(team.alice.user)
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert "[in_progress] Fix the CSV reader" in page
    assert "Also: do not touch the legacy loader." in page
