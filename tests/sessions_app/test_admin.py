"""Django admin: policies validate per field and presets apply."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

from compaction.policy import PRESETS
from sessions_app.models import ApiKey, CompactionPolicy

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(client):
    user = get_user_model().objects.create_superuser("root", "root@example.invalid", "root-pass-123")
    client.force_login(user)
    return client


def test_policy_validation_reports_each_field(team):
    policy = team.project.policy
    policy.compact, policy.summarize, policy.output_reserve = 0.9, 0.8, 0.7
    with pytest.raises(ValidationError) as err:
        policy.full_clean()
    assert {"summarize", "output_reserve"} <= set(err.value.message_dict)


def test_admin_change_form_shows_the_error_next_to_the_field(staff, team):
    policy = team.project.policy
    url = f"/admin/sessions_app/compactionpolicy/{policy.pk}/change/"
    form = {f: getattr(policy, f) for f in CompactionPolicy.ENGINE_FIELDS}
    form.update(
        project=team.project.pk,
        preset="custom",
        remind=0.5,
        compact=0.9,
        summarize=0.8,
        handoff=0.95,
        preserve_patterns="[]",
        auto="on",
    )
    response = staff.post(url, form)
    assert response.status_code == 200
    assert b"Must be at least the compact threshold" in response.content
    policy.refresh_from_db()
    assert policy.summarize != 0.8


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
