"""A policy change re-evaluates the project's active sessions at once: one that the new numbers put
over a threshold gets a queued compaction, sent to the workers, without waiting for its next append.
Whichever way the policy changed (REST, admin, the settings page, a preset), and nothing else moves."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from compaction.messages import normalize_message
from compaction.types import Level
from sessions_app import tasks
from sessions_app.models import AgentSession, Compaction, CompactionPolicy, SessionStatus
from sessions_app.selectors import usage
from sessions_app.services import agent_sessions, auto_compaction, ingest, projects
from tests.conftest import Api, Team

pytestmark = pytest.mark.django_db

# Under gsd (compact at 90 %) the sessions sit at 78 %: below it, and above the default's 70 %.
FILLED = 0.78


def filled_session(project: Any, user: Any, name: str) -> AgentSession:
    """A session at FILLED of its window, stored without the step an append sets off."""
    session = agent_sessions.session_create(user=user, project=project, name=name)
    message = normalize_message({"role": "user", "content": "word " * 600})
    ingest.message_append(session=session, messages=[message])
    session.refresh_from_db()
    used = usage.session_usage(session).used
    AgentSession.objects.filter(pk=session.pk).update(context_window_override=round(used / FILLED))
    session.refresh_from_db()
    return session


@pytest.fixture
def world(team: Team, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Three sessions at 78 % under gsd: one active in the team's project, one closed there, one in
    Mallory's project. What is sent to the workers is recorded instead of run."""
    for project in (team.project, team.mallory.user.projects.get()):
        projects.policy_apply_preset(policy=project.policy, preset_name="gsd")
    other_project = team.mallory.user.projects.get()
    sessions = {
        "active": filled_session(team.project, team.alice.user, "active"),
        "closed": filled_session(team.project, team.alice.user, "closed"),
        "elsewhere": filled_session(other_project, team.mallory.user, "elsewhere"),
    }
    AgentSession.objects.filter(pk=sessions["closed"].pk).update(status=SessionStatus.HANDED_OFF)
    assert usage.session_usage(sessions["active"]).level < Level.COMPACT
    sent: list[int] = []

    # The compactions sent to the workers (webhook deliveries are sent too, with no argument).
    def send(task: object, *args: Any, **kw: Any) -> bool:
        if task is tasks.run_compaction:
            sent.append(args[0])
        return True

    monkeypatch.setattr(tasks, "send", send)
    return {"team": team, "sessions": sessions, "sent": sent}


def lower_by_rest(team: Team, client: Any) -> None:
    response = Api(client, team.alice).patch(
        f"/api/v1/projects/{team.project.pk}/policy/", {"remind": 0.6, "compact": 0.7}
    )
    assert response.status_code == 200, response.content


def preset_by_rest(team: Team, client: Any) -> None:
    response = Api(client, team.alice).patch(f"/api/v1/projects/{team.project.pk}/policy/", {"preset": "default"})
    assert response.status_code == 200, response.content


def lower_in_admin(team: Team, client: Any) -> None:
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.invalid", "root-pass-123"))
    policy = CompactionPolicy.objects.get(project=team.project)
    form = {f: getattr(policy, f) for f in CompactionPolicy.ENGINE_FIELDS}
    form.update(project=team.project.pk, preserve_patterns="\n".join(policy.preserve_patterns), remind=0.6, compact=0.7)
    form = {name: "" if value is None else value for name, value in form.items() if value is not False}
    response = client.post(f"/admin/sessions_app/compactionpolicy/{policy.pk}/change/", form)
    assert response.status_code == 302, response.context["adminform"].form.errors


def preset_in_admin(team: Team, client: Any) -> None:
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.invalid", "root-pass-123"))
    policy = CompactionPolicy.objects.get(project=team.project)
    data = {"action": "apply_preset_default", "_selected_action": [policy.pk]}
    assert client.post("/admin/sessions_app/compactionpolicy/", data).status_code == 302


def lower_on_settings_page(team: Team, client: Any) -> None:
    client.force_login(team.alice.user)
    policy = CompactionPolicy.objects.get(project=team.project)
    form = {f: getattr(policy, f) for f in CompactionPolicy.ENGINE_FIELDS}
    form.update(preserve_patterns="\n".join(policy.preserve_patterns), remind=0.6, compact=0.7)
    form = {name: "" if value is None else value for name, value in form.items() if value is not False}
    assert client.post(reverse("web:policy-update", args=[team.project.pk]), form).status_code == 302


def preset_on_settings_page(team: Team, client: Any) -> None:
    client.force_login(team.alice.user)
    path = reverse("web:policy-preset", args=[team.project.pk])
    assert client.post(path, {"preset": "default"}).status_code == 302


@pytest.mark.parametrize(
    "change",
    [lower_by_rest, preset_by_rest, lower_in_admin, preset_in_admin, lower_on_settings_page, preset_on_settings_page],
)
def test_a_policy_change_queues_the_sessions_now_over_a_threshold(world, client, change: Callable[..., None]):
    sessions = world["sessions"]
    change(world["team"], client)
    policy = CompactionPolicy.objects.get(project=world["team"].project)
    assert policy.compact == 0.7
    queued = list(Compaction.objects.filter(session=sessions["active"]))
    assert [(c.trigger, c.status, c.level) for c in queued] == [("auto", "queued", "compact")]
    assert world["sent"] == [queued[0].pk]  # sent to the workers once the change was committed
    assert not Compaction.objects.filter(session__in=[sessions["closed"], sessions["elsewhere"]]).exists()


def test_re_evaluation_queues_once_and_spares_sessions_that_opted_out(world):
    team, sessions = world["team"], world["sessions"]
    opted_out = filled_session(team.project, team.alice.user, "opted out")
    AgentSession.objects.filter(pk=opted_out.pk).update(auto_compact=False)
    projects.policy_update(policy=team.project.policy, changes={"remind": 0.6, "compact": 0.7})
    first = auto_compaction.project_reevaluate(team.project)
    assert first == list(Compaction.objects.filter(session=sessions["active"]).values_list("pk", flat=True))
    assert auto_compaction.project_reevaluate(team.project) == []  # one queued at a time: nothing more
    assert not Compaction.objects.filter(session=opted_out).exists()


def test_a_change_that_puts_nobody_over_a_threshold_queues_nothing(world):
    team = world["team"]
    policy = projects.policy_update(policy=team.project.policy, changes={"summary_budget": 700})
    tasks.after_policy_change(team.project)
    assert policy.preset == "custom"
    assert not Compaction.objects.exists() and world["sent"] == []
