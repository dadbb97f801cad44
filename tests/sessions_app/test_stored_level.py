"""A session's stored level and usage (``AgentSession.level``/``usage_percent``, what the project
list's level filter, the dashboard and the metrics read in SQL) are always what STATUS works out from
its totals: after appends, edits, compactions, reverts, exact counts, policy and model profile
changes, archiving. Sessions without them (from before they were stored) are worked out by readers
and filled in by the relevel job."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from sessions_app import tasks
from sessions_app.models import AgentSession, Compaction, CompactionStatus, ModelProfile
from sessions_app.selectors import usage
from sessions_app.selectors.dashboard import project_dashboard
from sessions_app.services import agent_sessions, auto_compaction, compaction_runs, projects, reverting
from tests.hypothesis_budget import DATABASE
from tests.sessions_app.compaction_helpers import agent_rounds, append

pytestmark = pytest.mark.django_db

LEVELS = ("ok", "remind", "compact", "summarize", "handoff")


def live(session: AgentSession) -> tuple[str, float]:
    session.refresh_from_db()
    status = usage.session_status(session)
    return status["level"], status["usage_percent"]


def stored(session: AgentSession) -> tuple[str, float | None]:
    return tuple(AgentSession.objects.values_list("level", "usage_percent").get(pk=session.pk))  # type: ignore[return-value]


def assert_stored_is_live(project: Any) -> None:
    for session in AgentSession.objects.filter(project=project):
        assert stored(session) == live(session), f"session {session.pk} ({session.status})"


def forget(*sessions: AgentSession) -> None:
    """As a session from before the columns came: nothing stored yet."""
    AgentSession.objects.filter(pk__in=[s.pk for s in sessions]).update(level="", usage_percent=None)


def make(team: Any, name: str, rounds: int, window: int) -> AgentSession:
    session = agent_sessions.session_create(
        user=team.alice.user, project=team.project, name=name, context_window=window, auto_compact=False
    )
    if rounds:
        append(session, agent_rounds(rounds, seed=len(name) + rounds, output_lines=50))
    return session


def spread(team: Any) -> list[AgentSession]:
    """Sessions at every level of the default policy (and one closed)."""
    made = [make(team, f"s{n}", rounds, 20_000) for n, rounds in enumerate([0, 2, 8, 11, 13, 16, 20])]
    closed = make(team, "closed", 14, 20_000)
    agent_sessions.session_update(session=closed, status="archived")
    found = [*made, closed]
    for session in found:
        session.refresh_from_db()
    return found


OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 6)),
        st.tuples(st.just("window"), st.sampled_from([None, 6_000, 12_000, 40_000])),
        st.tuples(st.just("model"), st.sampled_from(["claude-sonnet-4-5", "claude-haiku-4-5", "someones-own"])),
        st.tuples(st.just("system"), st.sampled_from(["", "Be brief. " * 200])),
        st.tuples(st.just("compact"), st.sampled_from(["compact", "summarize"])),
        st.tuples(st.just("revert"), st.none()),
        st.tuples(st.just("preset"), st.sampled_from(["default", "adk", "kai", "gsd", "brainchain"])),
        st.tuples(st.just("profile"), st.sampled_from([8_000, 30_000, 200_000])),
        st.tuples(st.just("archive"), st.none()),
    ),
    min_size=1,
    max_size=6,
)


@hsettings(DATABASE)
@given(operations=OPERATIONS, which=st.lists(st.integers(0, 1), min_size=6, max_size=6))
def test_stored_level_and_usage_are_status_after_anything(team, operations, which):
    AgentSession.objects.filter(project=team.project).delete()
    sessions = [make(team, "a", 4, 16_000), make(team, "b", 9, 24_000)]
    rounds = 100
    for (kind, arg), index in zip(operations, which, strict=False):
        session = sessions[index]
        session.refresh_from_db()
        active = session.status == "active"
        if kind == "append" and active:
            append(session, agent_rounds(arg, seed=rounds, start=rounds, output_lines=40))
            rounds += arg
        elif kind == "window":
            agent_sessions.session_update(session=session, context_window_override=arg)
        elif kind == "model":
            agent_sessions.session_update(session=session, model=arg)
        elif kind == "system":
            agent_sessions.session_update(session=session, system_prompt=arg)
        elif kind == "compact" and active and session.message_count:
            record = compaction_runs.compaction_request(session=session, level=arg, user=None)
            compaction_runs.compaction_run(record.pk)
        elif kind == "revert":
            newest = Compaction.objects.filter(session=session, status=CompactionStatus.SUCCEEDED).order_by("-pk")
            if newest.exists() and active:
                reverting.compaction_revert(compaction=newest.first())
        elif kind == "preset":
            policy = projects.policy_ensure(project=team.project)
            projects.policy_apply_preset(policy=policy, preset_name=arg)
            tasks.after_policy_change(team.project)
        elif kind == "profile":
            ModelProfile.objects.update_or_create(
                name="claude-sonnet-4-5", defaults={"context_window": arg, "max_output_tokens": 8_000}
            )
            tasks.after_model_profile_change()
        elif kind == "archive":
            agent_sessions.session_update(session=session, status="archived")
        assert_stored_is_live(team.project)


def test_relevel_fills_sessions_without_figures_and_moves_nothing_twice(team):
    sessions = spread(team)
    forget(*sessions[::2])
    assert auto_compaction.sessions_relevel().moved == len(sessions[::2])
    assert_stored_is_live(team.project)
    assert auto_compaction.sessions_relevel().moved == 0


def test_the_level_filter_lists_the_sessions_at_that_level_stored_or_not(team, client):
    sessions = spread(team)
    forget(*sessions[1::3])
    client.force_login(team.bob.user)
    for level in LEVELS:
        page = client.get(f"/projects/{team.project.pk}/?level={level}")
        assert page.status_code == 200
        listed = {row["session"].pk for row in page.context["page"].object_list}
        expected = {s.pk for s in sessions if live(s)[0] == level}
        assert listed == expected, level
    assert {live(s)[0] for s in sessions} >= {"ok", "compact", "handoff"}  # the filter met several levels


def test_dashboard_counts_and_ranks_stored_and_unknown_sessions_alike(team):
    sessions = spread(team)
    active = [s for s in sessions if s.status == "active"]
    expected = project_dashboard(project=team.project)
    forget(*active[::3])
    # Half-stored, as a crash between the two columns' writes could leave them: read as unknown too.
    AgentSession.objects.filter(pk__in=[s.pk for s in active[1::3]]).update(usage_percent=None)
    AgentSession.objects.filter(pk__in=[s.pk for s in active[2::6]]).update(level="")
    board = project_dashboard(project=team.project)
    assert board.levels == expected.levels == {level: sum(1 for s in active if live(s)[0] == level) for level in LEVELS}
    ranked = sorted(active, key=lambda s: (-live(s)[1], s.pk))[:5]
    assert [u.session.pk for u in board.closest] == [u.session.pk for u in expected.closest] == [s.pk for s in ranked]


def test_a_model_profile_edit_in_admin_moves_the_stored_levels(team, staff):
    session = make(team, "s", 10, 20_000)
    agent_sessions.session_update(session=session, context_window_override=None)  # the model's own window
    before = stored(session)
    profile = ModelProfile.objects.get(name="claude-sonnet-4-5")
    fields = ("name", "provider", "context_window", "max_output_tokens", "calibration_factor", "calibration_samples")
    data = {f: "" if getattr(profile, f) is None else getattr(profile, f) for f in fields}
    data |= {"context_window": 12_000, "input_price_per_mtok": ""}
    response = staff.post(f"/admin/sessions_app/modelprofile/{profile.pk}/change/", data)
    assert response.status_code == 302, response.content[:2000]
    assert stored(session) == live(session) != before
    assert before[0] == "ok" and stored(session)[0] != "ok"


def test_relevel_decides_on_levels_that_moved_not_on_levels_seen_for_the_first_time(team):
    session = make(team, "s", 10, 20_000)
    agent_sessions.session_update(session=session, context_window_override=None, auto_compact=True)
    assert stored(session)[0] == "ok"
    ModelProfile.objects.filter(name="claude-sonnet-4-5").update(context_window=9_000)
    forget(session)
    first = auto_compaction.sessions_relevel()  # an upgrade: its level is worked out, nothing is decided on it
    assert (first.moved, first.queued) == (1, [])
    assert stored(session)[0] in ("compact", "summarize", "handoff")
    ModelProfile.objects.filter(name="claude-sonnet-4-5").update(context_window=200_000)
    auto_compaction.sessions_relevel()
    ModelProfile.objects.filter(name="claude-sonnet-4-5").update(context_window=9_000)
    moved = auto_compaction.sessions_relevel()  # a profile's edit moved it from ok: decided as after an append
    assert moved.moved == 1 and len(moved.queued) == 1
    assert Compaction.objects.get(pk=moved.queued[0]).session_id == session.pk


def test_the_sessions_gauge_counts_stored_and_unknown_levels_alike(team):
    from sessions_app.selectors.ops_metrics import gauges

    sessions = spread(team)
    active = [s for s in sessions if s.status == "active"]
    expected = {level: sum(1 for s in active if live(s)[0] == level) for level in LEVELS}
    assert gauges().sessions_by_level == expected
    forget(*active[1::2])
    assert gauges().sessions_by_level == expected
