"""`ctx status` without a session: the project overview (sessions by level, the closest to their
window), and the levels in colour on a terminal only."""

from __future__ import annotations

import io
import json
import re
from collections import Counter

import pytest
from django.core.management import CommandError, call_command

from compaction.messages import normalize_message
from sessions_app.models import AgentSession, SessionStatus
from sessions_app.services import ingest, projects
from sessions_app.services.demo import demo_load

pytestmark = pytest.mark.django_db

GREEN = "\x1b[32m"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def ctx(*args: str, out: io.StringIO | None = None) -> str:
    out = out if out is not None else io.StringIO()
    call_command("ctx", *args, stdout=out)
    return out.getvalue()


def test_the_overview_is_the_demo_project_by_level_and_closest_first(settings):
    settings.CTX_DEMO_ADMIN = True  # the demo user is then the superuser `ctx` acts as
    ctx("demo")  # as `make run` loads it: its sessions' levels worked out after their appends
    demo = demo_load()
    overview = json.loads(ctx("status", "--json"))
    assert overview["project"] == demo.project.pk and overview["name"] == demo.project.name
    statuses = {
        s.pk: json.loads(ctx("status", str(s.pk), "--json"))
        for s in AgentSession.objects.filter(project=demo.project, status=SessionStatus.ACTIVE)
    }
    by_level = Counter(status["level"] for status in statuses.values())
    assert overview["levels"] == {level: by_level[level] for level in overview["levels"]}
    assert overview["sessions"] == len(statuses) and len(overview["levels"]) == 5
    closest = overview["closest"]
    assert 3 <= len(closest) <= 5
    assert [c["usage_percent"] for c in closest] == sorted((c["usage_percent"] for c in closest), reverse=True)
    top = max(statuses, key=lambda pk: statuses[pk]["usage_percent"])
    assert closest[0]["session"] == top and closest[0]["level"] == statuses[top]["level"]
    for row in closest:
        assert row["usage_percent"] == pytest.approx(statuses[row["session"]]["usage_percent"], abs=0.1)

    assert len(json.loads(ctx("status", "--json", "--top", "2"))["closest"]) == 2
    human = ctx("status", "--project", demo.project.name)
    assert f"Project {demo.project.pk} · {demo.project.name}" in human
    assert "Closest to their window:" in human and str(closest[0]["session"]) in human
    assert "\x1b[" not in human  # not a terminal: plain


def test_the_overview_asks_which_project_when_the_user_has_several(team, session_of):
    session = session_of(name="one message")
    ingest.message_append(session=session, messages=[normalize_message({"role": "user", "content": "hi " * 50})])
    other = projects.project_create(user=team.alice.user, name="Beta")
    with pytest.raises(CommandError, match=rf"--project.*{team.project.pk} \(Alpha\), {other.pk} \(Beta\)"):
        ctx("status", "--user", "alice")
    by_name = json.loads(ctx("status", "--user", "alice", "--project", "Alpha", "--json"))
    by_id = json.loads(ctx("status", "--user", "alice", "--project", str(team.project.pk), "--json"))
    assert by_name == by_id
    assert by_name["levels"]["ok"] == 1 and [c["session"] for c in by_name["closest"]] == [session.pk]
    assert json.loads(ctx("status", "--user", "alice", "--project", "Beta", "--json"))["sessions"] == 0
    with pytest.raises(CommandError, match="No project \"Mallory's own\" among alice's"):
        ctx("status", "--user", "alice", "--project", "Mallory's own")
    with pytest.raises(CommandError, match="No superuser"):
        ctx("status")
    with pytest.raises(CommandError, match="--history"):
        ctx("status", "--user", "alice", "--history")


def _one_session_status(session_of, out: io.StringIO, monkeypatch, no_color: str | None, *flags: str) -> str:
    """``ctx [FLAGS] status SESSION`` of a session at "ok" (``--json`` goes after the subcommand)."""
    if no_color is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", no_color)
    session = session_of(name="s", context_window=1000)
    ingest.message_append(session=session, messages=[normalize_message({"role": "user", "content": "hi"})])
    before = [f for f in flags if f != "--json"]
    return ctx(*before, "status", str(session.pk), *(f for f in flags if f == "--json"), out=out)


def test_levels_are_coloured_on_a_terminal(session_of, monkeypatch):
    shown = _one_session_status(session_of, Terminal(), monkeypatch, None)
    assert f"{GREEN}ok\x1b[0m" in shown
    # An empty NO_COLOR is no request (no-color.org), and Django's --force-color colours a pipe.
    assert GREEN in _one_session_status(session_of, Terminal(), monkeypatch, "")
    assert GREEN in _one_session_status(session_of, io.StringIO(), monkeypatch, None, "--force-color")


@pytest.mark.parametrize(
    ("out", "no_color", "flags"),
    [
        (io.StringIO(), None, ()),  # piped
        (Terminal(), "1", ()),  # NO_COLOR, any non-empty value
        (Terminal(), None, ("--no-color",)),
        (Terminal(), None, ("--json",)),  # JSON is never dressed
    ],
)
def test_levels_are_plain_when_piped_or_asked(session_of, monkeypatch, out, no_color, flags):
    shown = _one_session_status(session_of, out, monkeypatch, no_color, *flags)
    assert "\x1b[" not in shown and "ok" in shown


def test_the_overview_colours_its_levels_on_a_terminal(team, session_of, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    full = session_of(name="full", context_window=1000)
    ingest.message_append(session=full, messages=[normalize_message({"role": "user", "content": "word " * 900})])
    shown = ctx("status", "--user", "alice", out=Terminal())
    assert f"{GREEN}ok\x1b[0m" in shown and "\x1b[1;31mhandoff\x1b[0m" in shown
    # The colour codes are all the terminal gets more: the columns are the piped output's.
    assert re.sub(r"\x1b\[[0-9;]*m", "", shown) == ctx("status", "--user", "alice")
