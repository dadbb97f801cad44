"""Thresholds in tokens: a session's readers (STATUS, automatic compaction, a run's plan, the lists and
the session page) see the policy resolved for its own window; the settings page, Django admin and the
REST endpoint store the token fields; applying gsd sets its 90k (seed 002)."""

from __future__ import annotations

import importlib
import re
from typing import Any

import pytest
from django.apps import apps as django_apps
from django.urls import reverse

from compaction.tokens import DEFAULT_FRAMING
from compaction.types import Level
from sessions_app.models import AgentSession, CompactionPolicy, ModelProfile
from sessions_app.selectors import usage
from sessions_app.services import auto_compaction, planning, projects
from tests.conftest import Team

pytestmark = pytest.mark.django_db


@pytest.fixture
def gsd(team: Team) -> CompactionPolicy:
    """The team's project under gsd, and two models of calibration 1.0: a 200k window and a 32k one."""
    ModelProfile.objects.create(name="acme-200k", provider="acme", context_window=200_000)
    ModelProfile.objects.create(name="acme-32k", provider="acme", context_window=32_000)
    usage.forget_model_profiles()
    return projects.policy_apply_preset(policy=team.project.policy, preset_name="gsd")


def using(session: AgentSession, used: int) -> AgentSession:
    """The session with ``used`` tokens in its window (its message totals set so; no system prompt)."""
    AgentSession.objects.filter(pk=session.pk).update(message_tokens=used - DEFAULT_FRAMING.request)
    session.refresh_from_db()
    assert usage.session_status(session)["used"] == used
    return session


def test_applying_gsd_sets_its_90k_and_another_preset_clears_it(gsd, team):
    assert (gsd.compact_tokens, gsd.summarize_tokens, gsd.remind_tokens, gsd.preset) == (90_000, 90_000, None, "gsd")
    kai = projects.policy_apply_preset(policy=gsd, preset_name="kai")
    assert (kai.compact_tokens, kai.summarize_tokens, kai.preset) == (None, None, "kai")


def test_a_200k_session_under_gsd_reaches_compact_at_90k_tokens(gsd, session_of):
    session = using(session_of(model="acme-200k", name="big"), 89_999)
    status = usage.session_status(session)
    assert status["context_window"] == 200_000
    assert status["thresholds"] == {"remind": 0.45, "compact": 0.45, "summarize": 0.45, "handoff": 1.0}
    assert status["threshold_tokens"] == {"remind": 90_000, "compact": 90_000, "summarize": 90_000, "handoff": 200_000}
    assert (status["level"], status["will_compact"]) == ("ok", False)
    assert auto_compaction.auto_level(session) is None

    session = using(session, 90_000)
    status = usage.session_status(session)
    # gsd's compact and summarize coincide: at 90k it is at summarize, a compaction is due.
    assert status["level"] == "summarize" and status["will_compact"] is True
    assert auto_compaction.auto_level(session) == Level.SUMMARIZE
    # A run plans with the same effective policy: the trigger and a target below it.
    snap = planning.snapshot(session)
    assert snap.policy.compact == 0.45 and snap.policy.target_after < 0.45


def test_a_32k_session_under_gsd_keeps_its_fractions(gsd, session_of):
    session = using(session_of(model="acme-32k", name="small"), 28_799)
    status = usage.session_status(session)
    assert status["thresholds"] == {"remind": 0.9, "compact": 0.9, "summarize": 0.9, "handoff": 1.0}
    assert status["threshold_tokens"]["compact"] == 28_800
    assert status["level"] == "ok"
    assert usage.session_status(using(session, 28_800))["level"] == "summarize"


def test_status_over_rest_carries_the_effective_thresholds_and_their_tokens(gsd, session_of, api_as, team):
    session = using(session_of(model="acme-200k", name="big"), 100_000)
    status = api_as(team.carol).get(f"/api/v1/sessions/{session.pk}/status/").json()
    assert status["thresholds"]["compact"] == 0.45 and status["threshold_tokens"]["compact"] == 90_000
    assert status["level"] == "summarize"


def test_readers_of_many_sessions_resolve_the_policy_for_each_ones_window(gsd, session_of, client, team):
    # One policy for the project, two windows: 60 % is past 90k on the big one, not 90 % of the small.
    big = using(session_of(model="acme-200k", name="big", auto_compact=False), 120_000)
    small = using(session_of(model="acme-32k", name="small", auto_compact=False), 19_200)
    AgentSession.objects.filter(pk__in=[big.pk, small.pk]).update(level="", usage_percent=None)
    unleveled = {s.pk: current.level for s, current in usage.unleveled(AgentSession.objects.all())}
    assert unleveled == {big.pk: Level.SUMMARIZE, small.pk: Level.OK}
    auto_compaction.sessions_relevel(AgentSession.objects.filter(pk__in=[big.pk, small.pk]))
    stored = dict(AgentSession.objects.filter(pk__in=[big.pk, small.pk]).values_list("pk", "level"))
    assert stored == {big.pk: "summarize", small.pk: "ok"}
    # The session page marks the effective thresholds.
    client.force_login(team.alice.user)
    page = client.get(reverse("web:session", args=[big.pk])).content.decode()
    assert "compact 45.0% (90000)" in page


# ----------------------------------------------------------------------------- REST


def policy_url(team: Team) -> str:
    return f"/api/v1/projects/{team.project.pk}/policy/"


def test_the_api_reads_and_writes_thresholds_in_tokens(api_as, team):
    admin = api_as(team.alice)
    body = admin.patch(policy_url(team), {"compact_tokens": 90_000, "target_after_tokens": 50_000}).json()
    assert (body["compact_tokens"], body["target_after_tokens"], body["remind_tokens"]) == (90_000, 50_000, None)
    assert body["preset"] == "custom"
    assert admin.get(policy_url(team)).json() == body
    stored = CompactionPolicy.objects.get(project=team.project)
    assert (stored.compact_tokens, stored.target_after_tokens) == (90_000, 50_000)
    # null unsets one: the fraction alone counts again, and the numbers are the default preset's.
    body = admin.patch(policy_url(team), {"compact_tokens": None, "target_after_tokens": None}).json()
    assert (body["compact_tokens"], body["preset"]) == (None, "default")
    assert admin.patch(policy_url(team), {"preset": "gsd"}).json()["summarize_tokens"] == 90_000


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"compact_tokens": 100_000, "summarize_tokens": 90_000}, "invalid_policy", "summarize_tokens"),
        ({"compact_tokens": 500}, "invalid_policy", "compact_tokens"),
        ({"compact_tokens": "90000"}, "invalid_type", "compact_tokens"),
        ({"compact_tokens": 90_000.5}, "invalid_type", "compact_tokens"),
        ({"compact_tokens": 90_000, "target_after_tokens": 95_000}, "invalid_policy", "target_after_tokens"),
    ],
)
def test_the_api_refuses_bad_token_thresholds_and_writes_nothing(api_as, team, body, code, field):
    before = CompactionPolicy.objects.filter(project=team.project).values().get()
    response = api_as(team.alice).patch(policy_url(team), body)
    assert response.status_code == 400
    error = response.json()
    assert (error["code"], error["field"]) == (code, field) and field in error["errors"] and error["detail"]
    assert CompactionPolicy.objects.filter(project=team.project).values().get() == before


def test_the_schema_documents_the_token_fields_as_nullable_integers():
    from drf_spectacular.generators import SchemaGenerator

    components = SchemaGenerator().get_schema(request=None, public=True)["components"]["schemas"]
    for name in ("remind_tokens", "compact_tokens", "summarize_tokens", "handoff_tokens", "target_after_tokens"):
        field: dict[str, Any] = components["PatchedPolicyPatchInRequest"]["properties"][name]
        assert (field["type"], field.get("nullable")) == ("integer", True), name
    status = components["Status"]["properties"]
    assert "threshold_tokens" in status and "threshold_tokens" in components["Status"]["required"]


# ----------------------------------------------------------------------------- the settings page and admin


def policy_post(policy: CompactionPolicy, **changes: Any) -> dict[str, Any]:
    from sessions_app.web.forms import PolicyForm

    data = {name: getattr(policy, name) for name in PolicyForm.Meta.fields}
    data = {name: "" if value is None else value for name, value in data.items()}
    data["preserve_patterns"] = "\n".join(policy.preserve_patterns or [])
    data["auto"] = "on" if data["auto"] else ""
    return {**data, **changes}


def test_the_settings_page_saves_tokens_shows_them_and_blank_unsets(client, team):
    client.force_login(team.alice.user)
    policy = CompactionPolicy.objects.get(project=team.project)
    save = reverse("web:policy-update", args=[team.project.pk])
    assert client.post(save, policy_post(policy, compact_tokens="90000", summarize_tokens="120000")).status_code == 302
    policy.refresh_from_db()
    assert (policy.compact_tokens, policy.summarize_tokens, policy.remind_tokens) == (90_000, 120_000, None)
    page = client.get(reverse("web:project-settings", args=[team.project.pk])).content.decode()
    assert re.search(r'<input[^>]*name="compact_tokens"[^>]*value="90000"', page)
    # Beside its fraction: the compact field comes right before it.
    assert page.index('id="id_compact"') < page.index('id="id_compact_tokens"') < page.index('id="id_summarize"')
    bad = client.post(save, policy_post(policy, summarize_tokens="80000"))
    assert bad.status_code == 400 and "Must be at least compact_tokens" in bad.content.decode()
    assert client.post(save, policy_post(policy, compact_tokens="", summarize_tokens="")).status_code == 302
    policy.refresh_from_db()
    assert (policy.compact_tokens, policy.summarize_tokens) == (None, None)


def test_admin_shows_the_token_fields_beside_the_fractions(staff, team):
    policy = team.project.policy
    response = staff.get(f"/admin/sessions_app/compactionpolicy/{policy.pk}/change/")
    fieldsets = {fs.name: fs for fs in response.context["adminform"]}
    thresholds = fieldsets["Thresholds"]
    assert thresholds.description == "fraction of the window, or tokens (takes the place of the fraction)"
    assert ("compact", "compact_tokens") in thresholds.fields
    assert ("target_after", "target_after_tokens") in fieldsets["What a run does"].fields


def test_the_migration_gives_policies_labelled_gsd_its_90k(team):
    step = importlib.import_module("sessions_app.migrations.0028_policy_threshold_tokens")
    following = projects.policy_apply_preset(policy=team.project.policy, preset_name="gsd")
    CompactionPolicy.objects.filter(pk=following.pk).update(compact_tokens=None, summarize_tokens=None)
    other = projects.project_create(user=team.alice.user, name="other").policy
    step.gsd_in_tokens(django_apps, None)
    following.refresh_from_db()
    other.refresh_from_db()
    assert (following.compact_tokens, following.summarize_tokens) == (90_000, 90_000)
    assert projects.preset_label(following) == "gsd"
    assert (other.compact_tokens, other.summarize_tokens) == (None, None)
