"""The newest prose survives (issue 30): the last three pieces of text the user or the assistant wrote
before a compaction are in the context after it (``GET …/context`` as the selectors build it, both
formats), word for word — at every level (a handoff's continuation included), under every preset,
with the offline summarizer or a model whose checkpoint leaves every fact out. Over generated coding
sessions (mostly tool calls and results, the prose further back) and every shared transcript."""

from __future__ import annotations

import io
import json
import math
import random
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django.test.utils import override_settings
from hypothesis import event, given, settings
from hypothesis import strategies as st

from bench.probes import FACTLESS_CHECKPOINT as FACTLESS
from bench.probes import last_prose, view
from compaction.policy import PRESETS
from sessions_app.models import AgentSession, Message, SessionStatus
from sessions_app.selectors import model_context, usage
from sessions_app.services import agent_sessions, compaction_runs, projects, reverting
from tests.fakes.anthropic_server import FakeAnthropic
from tests.hypothesis_budget import DATABASE
from tests.sessions_app.compaction_helpers import append, log_output
from tests.shared_data import SHARED_DATA

pytestmark = pytest.mark.django_db

REMINDER = "<system-reminder>\nThe date is 2026-11-27. Run make lint before committing.\n</system-reminder>"


@pytest.fixture(scope="module")
def factless_model() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        server.set_default_reply(json.dumps(FACTLESS))
        yield server


def summarizer_settings(which: str, server: FakeAnthropic) -> override_settings:
    if which == "offline":
        return override_settings(ANTHROPIC_API_KEY="")
    return override_settings(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=server.base_url, ANTHROPIC_MAX_RETRIES=0)


def context_of(session: AgentSession) -> AgentSession:
    """The session the agent goes on in: the continuation when a handoff closed this one."""
    session.refresh_from_db()
    if session.status == SessionStatus.HANDED_OFF:
        return AgentSession.objects.get(parent=session)
    return session


def missing_prose(session: AgentSession, pieces: list[str]) -> list[str]:
    """The pieces not in the context's text, in either format. Where the checkpoint's budget could not
    hold them (``adk``'s 500 tokens) and it says it cut their middles, their start and end are enough."""
    checkpoint = model_context.current_checkpoint(session)
    said = checkpoint is not None and "the middle of the newest prose" in (checkpoint.data.get("cuts") or [])
    missing = []
    for fmt in ("anthropic", "openai"):
        texts = view(model_context.session_context(session, fmt=fmt)["messages"], fmt).texts
        missing += [
            f"{fmt}: {piece[:80]!r}"
            for piece in pieces
            if piece not in texts and not (said and piece[:100] in texts and piece[-100:] in texts)
        ]
    return missing


def history_of(session: AgentSession) -> list[dict[str, Any]]:
    rows = Message.objects.filter(session=session).order_by("seq").values_list("role", "content", "metadata")
    return [{"role": role, "content": content, "metadata": metadata or {}} for role, content, metadata in rows]


# ----------------------------------------------------------------------------- generated sessions


@st.composite
def coding_session(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A first request; then mostly calls with long outputs, prose (explanations, a user's remark, a
    log-like text, one said twice) sprinkled in, harness text in the user's turn now and then."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing build, keep the API as is."}]
    said: list[str] = []
    seed = draw(st.integers(0, 1000))
    for turn in range(draw(st.integers(6, 30))):
        kind = draw(st.sampled_from(["calls"] * 6 + ["user", "reminder", "explain", "verbose", "repeat"]))
        if kind == "user":
            messages.append({"role": "user", "content": f"Turn {turn}: also check src/mod_{turn}.py please."})
            continue
        if kind == "reminder":
            messages.append({"role": "user", "content": [{"type": "text", "text": REMINDER}]})
            continue
        blocks: list[dict[str, Any]] = []
        if kind == "explain":
            said.append(f"Turn {turn}: the root cause is the cache key; next I'll fix src/cache_{turn}.py.")
        elif kind == "verbose":
            said.append(f"Turn {turn}, what I read:\n" + log_output(random.Random(seed + turn), 60))
        if kind in ("explain", "verbose") or (kind == "repeat" and said):
            blocks.append({"type": "text", "text": said[-1] if kind != "repeat" else draw(st.sampled_from(said))})
        calls = [f"toolu_{turn}_{k}" for k in range(draw(st.integers(0 if blocks else 1, 2)))]
        blocks += [
            {"type": "tool_use", "id": c, "name": "Bash", "input": {"command": f"pytest tests/t_{turn}.py"}}
            for c in calls
        ]
        messages.append({"role": "assistant", "content": blocks})
        if calls:
            rng = random.Random(seed * 31 + turn)
            results = [
                {"type": "tool_result", "tool_use_id": c, "content": log_output(rng, draw(st.integers(10, 120)))}
                for c in calls
            ]
            messages.append({"role": "user", "content": results})
    return messages


@settings(DATABASE)
@given(
    messages=coding_session(),
    preset_name=st.sampled_from(list(PRESETS)),
    level=st.sampled_from(["compact", "summarize", "handoff"]),
    trigger=st.sampled_from(["auto", "manual"]),
    which=st.sampled_from(["offline", "model"]),
    fullness=st.sampled_from([0.9, 3.0]),
)
def test_property_the_newest_prose_is_in_the_context_after_any_run(
    team, factless_model, messages, preset_name, level, trigger, which, fullness
):
    projects.policy_apply_preset(policy=team.project.policy, preset_name=preset_name)
    session = agent_sessions.session_create(
        user=team.alice.user, project=team.project, name="p", model="claude-sonnet-4-5", auto_compact=False
    )
    append(session, messages)
    used = usage.session_status(session)["used"]
    AgentSession.objects.filter(pk=session.pk).update(context_window_override=math.ceil(used / fullness))
    session.refresh_from_db()
    pieces = last_prose(history_of(session))
    assert pieces, "every generated session has prose"

    with summarizer_settings(which, factless_model):
        record = compaction_runs.compaction_request(session=session, level=level, user=None, trigger=trigger)
        compaction_runs.compaction_run(record.pk)
    record.refresh_from_db()
    event(f"{preset_name} {level} {trigger}: {record.status}")
    assert record.status in ("succeeded", "skipped"), record.error
    assert not missing_prose(context_of(session), pieces)


# ----------------------------------------------------------------------------- every shared transcript


FILES = sorted(
    [("claude-code", p) for p in (SHARED_DATA / "claude_code").glob("*.jsonl")]
    + [("openai", p) for p in (SHARED_DATA / "openai").glob("*") if not p.name.startswith("LICENSE")]
) or [("claude-code", SHARED_DATA / "shared-data-missing.jsonl")]  # the shared_data fixture says why


def ctx(*args: str) -> dict[str, Any]:
    out = io.StringIO()
    call_command("ctx", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


@pytest.mark.data
@pytest.mark.parametrize(("fmt", "path"), FILES, ids=[p.name for _, p in FILES])
def test_the_newest_prose_of_a_real_transcript_survives_each_level(shared_data, team, factless_model, fmt, path):
    """Each main conversation in a window a third of its size: `compact`, `summarize` (offline, then
    the fact-less model) and a continued handoff, each reverted (or undone) before the next."""
    imported = ctx("import", str(path), "--format", fmt, "--project", str(team.project.pk), "--no-auto")
    session = AgentSession.objects.get(pk=imported["session"])
    window = max(1, imported["status"]["used"] // 3)
    AgentSession.objects.filter(pk=session.pk).update(context_window_override=window)
    pieces = last_prose(history_of(session))
    if not pieces:
        pytest.skip(f"{path.name}: no prose in its main conversation")
    for level, which in (("compact", "offline"), ("summarize", "offline"), ("summarize", "model")):
        with summarizer_settings(which, factless_model):
            record = compaction_runs.compaction_request(session=session, level=level, user=None, trigger="auto")
            compaction_runs.compaction_run(record.pk)
        record.refresh_from_db()
        assert record.status in ("succeeded", "skipped"), record.error
        assert not missing_prose(session, pieces), (level, which)
        # (a run stepped up to handoff may have changed no message: only its document is new)
        if record.status == "succeeded" and any(item["strategy"] != "handoff" for item in record.items):
            reverting.compaction_revert(compaction=record)
    projects.policy_update(policy=team.project.policy, changes={"auto_continue": True})
    record = compaction_runs.compaction_request(session=session, level="handoff", user=None, trigger="auto")
    with override_settings(ANTHROPIC_API_KEY=""):
        compaction_runs.compaction_run(record.pk)
    record.refresh_from_db()
    assert record.status in ("succeeded", "skipped"), record.error
    assert not missing_prose(context_of(session), pieces), "handoff"
