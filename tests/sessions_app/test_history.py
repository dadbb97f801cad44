"""A session's context over time (the session chart, its API and `ctx status --history`): built from
stored counts, it ends where STATUS stands, drops by exactly what each compaction saved, draws no
drop for a reverted one, and reads the same after the revert window's backups are gone."""

from __future__ import annotations

import io
import json
import re
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone
from hypothesis import given, settings
from hypothesis import strategies as st

from sessions_app.models import AgentSession, Compaction, MessageBackup
from sessions_app.selectors import usage
from sessions_app.selectors.history import SessionHistory, history_payload, session_history
from sessions_app.services import agent_sessions, retention
from tests.hypothesis_budget import DATABASE
from tests.sessions_app.compaction_helpers import agent_rounds, append
from tests.shared_data import SHARED_DATA

pytestmark = pytest.mark.django_db


@pytest.fixture
def busy(session_of):
    session = session_of(model="claude-sonnet-4-5", context_window=30_000, auto_compact=False)
    append(session, agent_rounds(24))
    return session


def compact(api, session, level="compact"):
    response = api.post(f"/api/v1/sessions/{session.pk}/compactions/", {"level": level})
    assert response.status_code == 202, response.content
    record = response.json()
    assert record["status"] == "succeeded", record
    return record


def used_line(history: SessionHistory) -> list[int]:
    return [p.used for p in history.points] + [history.now]


def assert_consistent(session: AgentSession, history: SessionHistory) -> None:
    """The invariants every history holds, whatever happened to the session."""
    session.refresh_from_db()
    succeeded = list(session.compactions.filter(status="succeeded").order_by("pk"))
    drops = [e for e in history.events if e.kind == "compaction"]
    assert [e.compaction_id for e in drops] == [c.pk for c in succeeded]
    for event, record in zip(drops, succeeded, strict=True):
        # The drop is exactly the saving the compaction recorded; where it starts may differ from the
        # recorded figure by the rounding of calibrated sums.
        assert record.tokens_before is not None and record.tokens_after is not None  # a succeeded one has both
        assert event.before - event.after == record.tokens_before - record.tokens_after
        if record.trigger == "transcript":  # the agent's own compaction, where its transcript put it
            assert event.after_seq == record.upto_seq
        else:
            assert abs(event.before - record.tokens_before) <= 2 + len(succeeded)
    assert [p.seq for p in history.points] == list(session.messages.order_by("seq").values_list("seq", flat=True))
    # Between two events the line only grows: a message never takes tokens away.
    cut = {e.after_seq for e in history.events if e.kind == "compaction"}
    for previous, point in zip(history.points, history.points[1:], strict=False):
        if previous.seq not in cut:
            assert point.used >= previous.used, (previous, point)
    session.exact_upto_seq = None  # the line is an estimate: compare it with STATUS's estimate
    status = usage.session_status(session)
    if history.points:
        assert abs(history.now - status["used"]) <= 1 + len(succeeded)
        last_drops = [e for e in drops if e.after_seq == history.points[-1].seq]
        assert history.now == (last_drops[-1].after if last_drops else history.points[-1].used)
    assert history.context_window == status["context_window"]


def test_history_ends_at_status_and_drops_by_each_saving(busy, api_as, team):
    api = api_as(team.bob)
    first = compact(api, busy)
    append(busy, agent_rounds(10, start=24, seed=2))
    second = compact(api, busy, "summarize")
    history = session_history(busy)
    assert_consistent(busy, history)
    drops = [e for e in history.events if e.kind == "compaction"]
    assert [(e.compaction_id, e.level) for e in drops] == [(first["id"], "compact"), (second["id"], "summarize")]
    assert drops[0].after_seq < drops[1].after_seq == history.points[-1].seq
    # Each assistant message answered a request that held everything before it.
    by_seq = {p.seq: p.used for p in history.points}
    assert history.context_sent > max(by_seq.values())


def test_a_reverted_compaction_draws_no_drop(busy, api_as, team):
    api = api_as(team.bob)
    untouched = used_line(session_history(busy))
    record = compact(api, busy)
    assert used_line(session_history(busy)) != untouched
    assert api.post(f"/api/v1/compactions/{record['id']}/revert/").status_code == 200
    history = session_history(busy)
    assert used_line(history) == untouched
    assert history.events == []
    assert_consistent(busy, history)


def test_history_reads_the_same_once_the_backups_are_gone(busy, api_as, team):
    compact(api_as(team.bob), busy)
    before = used_line(session_history(busy))
    later = timezone.now() + timedelta(days=3)
    retention.prune_run(now=later, parts=("backups",))
    assert not MessageBackup.objects.filter(compaction__session=busy).exists()
    after = used_line(session_history(busy))
    assert len(after) == len(before)
    # Without the backup, a message's original count comes back from the calibrated item: ±1 a message.
    changed = Compaction.objects.get(session=busy).items
    assert all(abs(a - b) <= len(changed) for a, b in zip(after, before, strict=True))
    assert after[-1] == before[-1]


@pytest.mark.data
@pytest.mark.parametrize(
    "path",
    sorted((SHARED_DATA / "claude_code").glob("*.jsonl")) or [SHARED_DATA / "missing.jsonl"],
    ids=lambda p: p.name,
)
def test_every_shared_transcript_imports_to_a_consistent_history(shared_data, team, path):
    """Claude Code's own compactions (compact boundaries) drop the line where they happened, not at
    the end of the import that read them."""
    out = io.StringIO()
    call_command("ctx", "import", str(path), "--format", "claude-code", "--project", "Alpha", "--json", stdout=out)
    session = AgentSession.objects.get(pk=json.loads(out.getvalue())["session"])
    history = session_history(session)
    assert_consistent(session, history)
    for sidechain in AgentSession.objects.filter(parent=session):
        assert_consistent(sidechain, session_history(sidechain))


def test_a_handoff_is_placed_after_the_last_message(busy, api_as, team):
    response = api_as(team.bob).post(f"/api/v1/sessions/{busy.pk}/handoff/", {"continue": False})
    assert response.status_code in (200, 201), response.content
    history = session_history(busy)
    (handoff,) = [e for e in history.events if e.kind == "handoff"]
    assert handoff.after_seq == history.points[-1].seq
    assert handoff.handoff_id == response.json()["id"]


def test_api_answers_the_history_to_members_and_viewers_only(busy, api_as, team):
    compact(api_as(team.bob), busy)
    expected = json.loads(json.dumps(history_payload(session_history(busy))))
    for persona in (team.alice, team.bob, team.carol):
        response = api_as(persona).get(f"/api/v1/sessions/{busy.pk}/history/")
        assert response.status_code == 200, response.content
        assert response.json() == expected
    outsider = api_as(team.mallory).get(f"/api/v1/sessions/{busy.pk}/history/")
    assert (outsider.status_code, outsider.json()["code"]) == (404, "not_found")
    assert api_as(None).get(f"/api/v1/sessions/{busy.pk}/history/").status_code in (401, 403)


def test_session_page_draws_the_chart_with_the_same_numbers(busy, api_as, team, client):
    compact(api_as(team.bob), busy)
    payload = api_as(team.bob).get(f"/api/v1/sessions/{busy.pk}/history/").json()
    client.force_login(team.carol.user)
    html = client.get(f"/sessions/{busy.pk}/").content.decode()
    svg = re.search(
        r'<svg viewBox="[^"]+" role="img" aria-labelledby="history-title history-desc".*?</svg>', html, re.S
    )
    assert svg, "the chart is missing"
    assert '<title id="history-title">' in svg.group(0) and '<desc id="history-desc">' in svg.group(0)
    events = re.findall(r'class="chart-event" data-kind="(\w+)" data-level="(\w+)" data-after-seq="(\d+)"', html)
    assert events == [(e["kind"], e["level"], str(e["after_seq"])) for e in payload["events"]]
    rows = [(int(a), int(b)) for a, b in re.findall(r'<tr data-seq="(\d+)" data-used="(\d+)">', html)]
    assert rows == [(p["seq"], p["used"]) for p in payload["points"]]
    for name, tokens in payload["threshold_tokens"].items():
        assert f'data-name="{name}" data-tokens="{tokens}"' in html
    assert f'data-last-used="{payload["now"]}"' in html


def test_session_without_messages_says_so(session_of, team, client):
    session = session_of()
    client.force_login(team.alice.user)
    html = client.get(f"/sessions/{session.pk}/").content.decode()
    assert "No message yet: the chart starts with the first one." in html
    assert session_history(session).points == []


def test_cli_history_json_is_the_api_answer_and_text_lists_each_compaction(busy, api_as, team):
    record = compact(api_as(team.bob), busy)
    out = io.StringIO()
    call_command("ctx", "status", str(busy.pk), "--history", "--json", stdout=out)
    assert json.loads(out.getvalue()) == api_as(team.bob).get(f"/api/v1/sessions/{busy.pk}/history/").json()
    text = io.StringIO()
    call_command("ctx", "status", str(busy.pk), "--history", stdout=text)
    event = session_history(busy).events[0]
    assert f"after message {event.after_seq}: compact (manual)" in text.getvalue()
    assert f"{event.before:,} → {event.after:,} tokens (compaction {record['id']})" in text.getvalue()
    assert f"Context used over {busy.messages.count()} messages" in text.getvalue()


operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(min_value=1, max_value=6)),
        st.tuples(st.just("compact"), st.sampled_from(["compact", "summarize"])),
        st.tuples(st.just("revert"), st.just("")),
    ),
    min_size=1,
    max_size=7,
)


@settings(DATABASE)
@given(steps=operations, chunk=st.integers(min_value=1, max_value=9))
def test_any_life_of_a_session_gives_a_consistent_history(team, api_as, steps, chunk):
    """Appends in any chunks, compactions and reverts in any order: the invariants hold, and the line
    up to each point is the same as for the same messages appended in one go."""
    api = api_as(team.bob)
    session = agent_sessions.session_create(
        user=team.alice.user,
        project=team.project,
        name="p",
        model="claude-sonnet-4-5",
        context_window=20_000,
        auto_compact=False,
    )
    one_shot = agent_sessions.session_create(
        user=team.alice.user,
        project=team.project,
        name="q",
        model="claude-sonnet-4-5",
        context_window=20_000,
        auto_compact=False,
    )
    start = 0
    for kind, arg in steps:
        if kind == "append":
            batch = agent_rounds(arg, start=start, seed=start + 1, output_lines=40)
            start += arg
            for i in range(0, len(batch), chunk):
                append(session, batch[i : i + chunk])
            append(one_shot, batch)
        elif kind == "compact":
            api.post(f"/api/v1/sessions/{session.pk}/compactions/", {"level": arg})
        else:
            newest = session.compactions.filter(status="succeeded").order_by("-pk").first()
            if newest is not None:
                api.post(f"/api/v1/compactions/{newest.pk}/revert/")
    history = session_history(session)
    assert_consistent(session, history)
    if not session.compactions.filter(status="succeeded").exists():
        assert used_line(history) == used_line(session_history(one_shot))
