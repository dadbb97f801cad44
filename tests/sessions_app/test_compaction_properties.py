"""Properties of compaction on generated sessions: revert gives back identical rows, and the context
handed to a model after any compaction is a valid Anthropic request."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from sessions_app.models import AgentSession, CompactionPolicy, Message
from sessions_app.selectors import model_context, usage
from sessions_app.services import agent_sessions, compaction_runs, reverting
from tests.hypothesis_budget import DATABASE
from tests.sessions_app.compaction_helpers import append, rows_of

pytestmark = pytest.mark.django_db

LINES = st.sampled_from(
    [
        "collecting tests ... ok",
        "[0042] worker cache index build queue",
        "src/app/models.py:12: in save",
        "ERROR tests/test_api.py::test_post failed: AssertionError",
        "## Decision: keep the retry loop",
        "ADR-7 use Postgres advisory locks",
        '{"id": 17, "state": "ready"}',
        "+    return value",
        "-    return None",
        "",
    ]
)
OUTPUTS = st.lists(LINES, min_size=1, max_size=120).map("\n".join)


@st.composite
def agent_session(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Prompts, assistant turns with 0–3 tool calls, results (sometimes split over two messages,
    sometimes repeating an earlier output), and a final prompt."""
    messages: list[dict[str, Any]] = []
    outputs: list[str] = []
    for turn in range(draw(st.integers(min_value=1, max_value=12))):
        if turn == 0 or draw(st.booleans()):
            messages.append({"role": "user", "content": draw(st.sampled_from(["Fix the build", "Go on", "Why?"]))})
        calls = [f"toolu_{turn}_{k}" for k in range(draw(st.integers(min_value=0, max_value=3)))]
        blocks: list[dict[str, Any]] = [{"type": "text", "text": draw(OUTPUTS)}]
        blocks += [{"type": "tool_use", "id": c, "name": "Bash", "input": {"command": "make"}} for c in calls]
        messages.append({"role": "assistant", "content": blocks})
        results = []
        for call in calls:
            repeat = bool(outputs) and draw(st.booleans())
            output = draw(st.sampled_from(outputs)) if repeat else draw(OUTPUTS)
            outputs.append(output)
            results.append({"type": "tool_result", "tool_use_id": call, "content": output, "is_error": False})
        if len(results) > 1 and draw(st.booleans()):  # Claude Code writes parallel results one per line
            messages += [{"role": "user", "content": [r]} for r in results]
        elif results:
            messages.append({"role": "user", "content": results})
    messages.append({"role": "user", "content": draw(st.sampled_from(["Summarize, verbatim please.", "Next?"]))})
    return messages


def assert_valid_request(turns: list[dict[str, Any]]) -> None:
    assert turns and turns[0]["role"] == "user"
    for i, turn in enumerate(turns):
        assert turn["role"] in ("user", "assistant")
        assert i == 0 or turn["role"] != turns[i - 1]["role"], "roles alternate"
        assert turn["content"], "no empty turn"
        blocks = turn["content"]
        if turn["role"] == "user":
            kinds = [b["type"] for b in blocks]
            results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
            assert kinds[: len(results)] == ["tool_result"] * len(results), "results come first"
            if results:
                previous = turns[i - 1]["content"]
                called = {b["id"] for b in previous if b["type"] == "tool_use"}
                assert set(results) <= called, "every result has its call in the message before"
        else:
            calls = [b["id"] for b in blocks if b["type"] == "tool_use"]
            assert turn["role"] == "assistant" and all(b["type"] != "tool_result" for b in blocks)
            if calls and i + 1 < len(turns):
                answered = {b.get("tool_use_id") for b in turns[i + 1]["content"]}
                assert set(calls) <= answered, "every call is answered in the next message"


def last_user_message_is_verbatim(session: AgentSession, turns: list[dict[str, Any]]) -> None:
    stored = Message.objects.filter(session=session, role="user").order_by("-seq").first()
    assert stored is not None
    content = stored.content
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    final_user = next(t for t in reversed(turns) if t["role"] == "user")
    assert all(b in final_user["content"] for b in blocks)


@settings(DATABASE)
@given(
    messages=agent_session(),
    level=st.sampled_from(["compact", "summarize"]),
    keep_turns=st.integers(min_value=0, max_value=3),
    protect=st.sampled_from([0, 300, 40_000]),
)
def test_compact_then_revert_is_identity_and_the_context_stays_valid(team, messages, level, keep_turns, protect):
    CompactionPolicy.objects.filter(project=team.project).update(
        keep_recent_turns=keep_turns, protect_tool_tokens=protect, keep_recent_messages=2
    )
    session = agent_sessions.session_create(user=team.alice.user, project=team.project, name="p", auto_compact=False)
    append(session, messages)
    used = usage.session_status(session)["used"]
    AgentSession.objects.filter(pk=session.pk).update(context_window_override=math.ceil(used / 0.9))
    session.refresh_from_db()
    rows = rows_of(session)

    record = compaction_runs.compaction_request(session=session, level=level, user=None)
    result = compaction_runs.compaction_run(record.pk)
    record.refresh_from_db()
    event(f"{level}: {record.status}")
    assert result == record.status and record.status in ("succeeded", "skipped")
    if record.status == "skipped":  # it freed nothing: nothing changed
        assert rows_of(session) == rows

    turns = model_context.session_context(session)["messages"]
    assert_valid_request(turns)
    last_user_message_is_verbatim(session, turns)

    if record.status == "succeeded":
        reverting.compaction_revert(compaction=record)
    assert rows_of(session) == rows
