"""Django admin: policies validate per field and presets apply."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.core.exceptions import ValidationError

from compaction.policy import PRESETS
from sessions_app.models import ApiKey, CompactionPolicy

pytestmark = pytest.mark.django_db


def test_policy_validation_reports_each_field(team):
    policy = team.project.policy
    policy.compact, policy.summarize, policy.output_reserve = 0.9, 0.8, 0.7
    with pytest.raises(ValidationError) as err:
        policy.full_clean()
    assert {"summarize", "output_reserve"} <= set(err.value.message_dict)


def change_url(policy: CompactionPolicy) -> str:
    return f"/admin/sessions_app/compactionpolicy/{policy.pk}/change/"


def admin_form(policy: CompactionPolicy, **changes) -> dict:
    """The change form as admin renders it for ``policy``, with ``changes`` typed in."""
    form = {f: getattr(policy, f) for f in CompactionPolicy.ENGINE_FIELDS}
    form.update(project=policy.project_id, preserve_patterns="\n".join(policy.preserve_patterns))
    form.update(changes)
    # An unticked box is not sent; an empty number (a threshold in tokens left unset) is sent empty.
    return {name: "" if value is None else value for name, value in form.items() if value is not False}


def test_admin_change_form_shows_the_error_next_to_the_field(staff, team):
    policy = team.project.policy
    response = staff.post(change_url(policy), admin_form(policy, remind=0.5, compact=0.9, summarize=0.8))
    assert response.status_code == 200
    assert "Must be at least the compact threshold" in response.context["adminform"].form.errors["summarize"][0]
    policy.refresh_from_db()
    assert policy.summarize != 0.8


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        # The engine's checks, reached through the model's clean exactly as on the settings page and in REST.
        ({"preserve_patterns": "^ok\n("}, "preserve_patterns", "is not a valid regular expression"),
        ({"target_after": 0.7}, "target_after", "Must be below the compact threshold"),
        ({"compact": 0.45, "remind": 0.4}, "target_after", "Must be below the compact threshold"),
        ({"tail_fraction": 0.9}, "tail_fraction", "smaller than the summarize threshold"),
    ],
)
def test_admin_refuses_what_the_settings_form_refuses(staff, team, changes, field, message):
    policy = team.project.policy
    before = CompactionPolicy.objects.filter(pk=policy.pk).values().get()
    response = staff.post(change_url(policy), admin_form(policy, **changes))
    assert response.status_code == 200
    assert message in " ".join(response.context["adminform"].form.errors[field])
    assert CompactionPolicy.objects.filter(pk=policy.pk).values().get() == before


def test_admin_shows_every_engine_setting_and_the_preset_read_only(staff, team):
    policy = team.project.policy
    form = staff.get(change_url(policy)).context["adminform"].form
    assert set(CompactionPolicy.ENGINE_FIELDS) <= set(form.fields)
    assert "preset" not in form.fields
    # A preset typed into the post is ignored: the label comes from the numbers.
    response = staff.post(change_url(policy), admin_form(policy, preset="kai"))
    assert response.status_code == 302
    policy.refresh_from_db()
    assert policy.preset == "default"


def test_admin_edits_label_the_policy_custom_until_it_equals_a_preset(staff, team):
    policy = team.project.policy
    assert staff.post(change_url(policy), admin_form(policy, summary_budget=800)).status_code == 302
    policy.refresh_from_db()
    assert (policy.preset, policy.summary_budget) == ("custom", 800)
    # The numbers of a preset, typed by hand (auto and the summarizer model aside), take its name.
    gsd = PRESETS["gsd"]
    numbers = {f: getattr(gsd, f) for f in CompactionPolicy.ENGINE_FIELDS if f not in ("auto", "summarizer_model")}
    numbers["preserve_patterns"] = "\n".join(gsd.preserve_patterns)
    assert staff.post(change_url(policy), admin_form(policy, auto=False, **numbers)).status_code == 302
    policy.refresh_from_db()
    assert (policy.preset, policy.auto) == ("gsd", False)


def test_admin_action_applies_a_preset(staff, team):
    policy = team.project.policy
    response = staff.post(
        "/admin/sessions_app/compactionpolicy/", {"action": "apply_preset_kai", "_selected_action": [policy.pk]}
    )
    assert response.status_code == 302
    policy.refresh_from_db()
    assert (policy.summarize, policy.output_reserve, policy.preset) == (0.65, 0.15, "kai")
    assert policy.to_engine().summarize == PRESETS["kai"].summarize


def test_admin_creates_api_keys_hashed_and_shows_them_once(staff, team):
    response = staff.post(
        "/admin/sessions_app/apikey/add/", {"user": team.carol.user.pk, "name": "from admin"}, follow=True
    )
    assert response.status_code == 200
    key = ApiKey.objects.get(name="from admin")
    shown = [str(m) for m in response.context["messages"]]
    raw = next(m.split(": ")[-1] for m in shown if "shown only once" in m)
    assert raw.startswith(key.prefix) and key.key_hash != raw


@pytest.mark.parametrize(
    "model",
    [
        "project",
        "agentsession",
        "message",
        "compaction",
        "checkpoint",
        "handoffdocument",
        "modelprofile",
        "messagebackup",
        "membership",
    ],
)
def test_admin_lists_render(staff, team, model):
    assert staff.get(f"/admin/sessions_app/{model}/").status_code == 200


def test_admin_is_for_staff_only(client, team):
    client.force_login(team.alice.user)
    assert client.get("/admin/sessions_app/project/").status_code == 302


def test_admin_adds_a_policy_to_a_project_without_one(staff, team):
    from sessions_app.models import Project

    bare = Project.objects.create(name="made in admin")
    form = admin_form(CompactionPolicy(project=bare), compact=0.75)
    response = staff.post("/admin/sessions_app/compactionpolicy/add/", form)
    assert response.status_code == 302
    assert CompactionPolicy.objects.values_list("preset", "compact").get(project=bare) == ("custom", 0.75)


def _reads_right(singular: str, plural: str) -> bool:
    """A plural Django would make by adding "s" to a consonant + "y" ("deliverys") reads wrong."""
    if len(singular) > 1 and singular.endswith("y") and singular[-2] not in "aeiou":
        return plural == singular[:-1] + "ies"
    return True


def test_every_admin_model_name_has_an_english_plural():
    wrong = {
        model._meta.label: str(model._meta.verbose_name_plural)
        for model in admin.site._registry
        if not _reads_right(str(model._meta.verbose_name), str(model._meta.verbose_name_plural))
    }
    assert wrong == {}


def test_the_admin_index_lists_webhook_deliveries(staff):
    page = staff.get("/admin/").content.decode()
    assert "Webhook deliveries" in page
    assert "deliverys" not in page
