"""``GET/PATCH /api/v1/projects/{id}/policy/``: every member reads it, project admins change it with
the validation of Django admin and the settings page, and a change re-evaluates the project's sessions."""

from __future__ import annotations

from typing import Any

import pytest
from drf_spectacular.generators import SchemaGenerator

from compaction.policy import PRESETS
from sessions_app.models import CompactionPolicy, Project

pytestmark = pytest.mark.django_db

FIELDS = {"preset", *CompactionPolicy.ENGINE_FIELDS}


def url(project: Any) -> str:
    return f"/api/v1/projects/{project.pk}/policy/"


def stored(project: Any) -> dict[str, Any]:
    return CompactionPolicy.objects.filter(project=project).values(*FIELDS, "updated_at").get()


@pytest.mark.parametrize("who", ["alice", "bob", "carol"])
def test_every_member_reads_the_policy(api_as, team, who):
    response = api_as(getattr(team, who)).get(url(team.project))
    assert response.status_code == 200
    body = response.json()
    assert set(body) == FIELDS
    assert body["preset"] == "default" and body["compact"] == PRESETS["default"].compact


def test_outsiders_get_404_and_strangers_401(api_as, team):
    outsider = api_as(team.mallory)
    for response in (outsider.get(url(team.project)), outsider.patch(url(team.project), {"compact": 0.8})):
        assert response.status_code == 404 and response.json()["code"] == "not_found"
    assert outsider.get("/api/v1/projects/999999/policy/").status_code == 404
    assert api_as(None).get(url(team.project)).status_code == 401


@pytest.mark.parametrize("who", ["bob", "carol"])
@pytest.mark.parametrize("body", [{"compact": 0.8}, {"preset": "kai"}, {"compact": "nonsense", "bogus": 1}])
def test_members_and_viewers_may_not_change_it(api_as, team, who, body):
    before = stored(team.project)
    response = api_as(getattr(team, who)).patch(url(team.project), body)
    # Refused on the role before the body is even looked at.
    assert response.status_code == 403 and response.json()["code"] == "permission_denied"
    assert stored(team.project) == before


def test_an_admin_changes_numbers_and_the_label_follows_them(api_as, team):
    admin = api_as(team.alice)
    response = admin.patch(url(team.project), {"compact": 0.75, "preserve_patterns": [r"^TODO "]})
    assert response.status_code == 200
    body = response.json()
    assert (body["compact"], body["preserve_patterns"], body["preset"]) == (0.75, [r"^TODO "], "custom")
    assert stored(team.project)["compact"] == 0.75
    # Back to the preset's numbers: the preset's name again.
    body = admin.patch(url(team.project), {"compact": 0.7, "preserve_patterns": []}).json()
    assert body["preset"] == "default"
    assert admin.get(url(team.project)).json() == body


def test_a_preset_applies_keeping_auto_and_the_summarizer(api_as, team):
    admin = api_as(team.alice)
    changed = {"auto": False, "summarizer_provider": "openai", "summarizer_model": "gpt-4.1-mini"}
    assert admin.patch(url(team.project), changed).status_code == 200
    body = admin.patch(url(team.project), {"preset": "kai"}).json()
    kai = PRESETS["kai"]
    assert (body["preset"], body["summarize"], body["output_reserve"]) == ("kai", kai.summarize, kai.output_reserve)
    assert (body["auto"], body["summarizer_provider"], body["summarizer_model"]) == (False, "openai", "gpt-4.1-mini")
    # Fields given alongside go on top of the preset, and the label tells it is no longer the preset.
    body = admin.patch(url(team.project), {"preset": "gsd", "summary_budget": 800, "auto": True}).json()
    assert (body["preset"], body["compact"], body["summary_budget"], body["auto"]) == ("custom", 0.9, 800, True)


BAD_BODIES = [
    # (body, code, the fields named)
    ({"bogus": 1, "compact": 0.8}, "unknown_field", {"bogus"}),
    ({"compact": "0.7"}, "invalid_type", {"compact"}),
    ({"compact": True}, "invalid_type", {"compact"}),
    ({"auto": 1}, "invalid_type", {"auto"}),
    ({"keep_recent_turns": 2.5}, "invalid_type", {"keep_recent_turns"}),
    ({"summarizer_model": 5}, "invalid_type", {"summarizer_model"}),
    ({"summarizer_model": "m" * 101}, "max_length", {"summarizer_model"}),
    ({"compact": None}, "null", {"compact"}),
    ({"preserve_patterns": "error"}, "not_a_list", {"preserve_patterns"}),
    ({"preserve_patterns": ["ok", 3]}, "invalid_type", {"preserve_patterns"}),
    ({"preset": "nope"}, "invalid_choice", {"preset"}),
    ({"summarizer_provider": "google"}, "invalid_choice", {"summarizer_provider"}),
    ({"summarizer_provider": 1}, "invalid_choice", {"summarizer_provider"}),
    # Values: the engine's validation, through the model's clean, as in admin and the settings page.
    ({"preserve_patterns": ["("]}, "invalid_policy", {"preserve_patterns"}),
    ({"target_after": 0.7}, "invalid_policy", {"target_after"}),
    ({"remind": 0.9, "compact": 0.8, "output_reserve": 0.6}, "invalid_policy", {"compact", "output_reserve"}),
    ({"keep_recent_turns": -1}, "invalid_policy", {"keep_recent_turns"}),
    ({"preset": "kai", "tail_fraction": 0.9}, "invalid_policy", {"tail_fraction"}),
    # The summarizer's model is one of its provider's (the default provider is anthropic).
    ({"summarizer_provider": "openai"}, "invalid_policy", {"summarizer_model"}),
    ({"summarizer_model": "gpt-4o-mini"}, "invalid_policy", {"summarizer_model"}),
    ({"summarizer_provider": "openai", "summarizer_model": "no-such-model"}, "invalid_policy", {"summarizer_model"}),
]


def test_an_admin_chooses_the_summarizers_provider_and_model(api_as, team):
    admin = api_as(team.alice)
    body = admin.patch(url(team.project), {"summarizer_provider": "openai", "summarizer_model": "gpt-4o-mini"}).json()
    assert (body["summarizer_provider"], body["summarizer_model"], body["preset"]) == (
        "openai",
        "gpt-4o-mini",
        "default",
    )
    refused = admin.patch(url(team.project), {"summarizer_model": "claude-haiku-4-5"}).json()
    assert refused["field"] == "summarizer_model" and "not an OpenAI model" in refused["detail"]
    # Offline takes no model of its own: whatever is named stays, unused.
    assert admin.patch(url(team.project), {"summarizer_provider": "offline"}).json()["summarizer_provider"] == "offline"


@pytest.mark.parametrize(("body", "code", "fields"), BAD_BODIES)
def test_bad_input_is_refused_naming_every_field_and_nothing_is_written(api_as, team, body, code, fields):
    before = stored(team.project)
    response = api_as(team.alice).patch(url(team.project), body)
    assert response.status_code == 400
    error = response.json()
    assert error["code"] == code
    assert fields <= set(error["errors"]) and error["field"] in error["errors"]
    assert error["detail"].startswith(error["field"])
    assert stored(team.project) == before


def test_a_body_that_is_no_object_is_refused(api_as, team):
    response = api_as(team.alice).patch(url(team.project), [{"compact": 0.8}])
    assert response.status_code == 400 and response.json()["code"] == "invalid_body"


def test_a_project_made_in_admin_without_a_policy_gets_one_on_its_first_edit(api_as, team):
    project = Project.objects.create(name="bare", created_by=team.alice.user)
    project.memberships.create(user=team.alice.user, role="admin")
    admin = api_as(team.alice)
    assert admin.get(url(project)).json()["preset"] == "default"
    assert admin.patch(url(project), {"preset": "adk"}).json()["preset"] == "adk"
    assert CompactionPolicy.objects.get(project=project).summary_budget == PRESETS["adk"].summary_budget


def test_the_schema_documents_every_policy_field_by_type():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    operations = schema["paths"]["/api/v1/projects/{project_id}/policy/"]
    assert {"get", "patch"} <= set(operations)
    assert {"200", "400", "403", "404"} <= set(operations["patch"]["responses"])
    components = schema["components"]["schemas"]
    out = components["PolicyOut"]["properties"]
    patch = components["PatchedPolicyPatchInRequest"]["properties"]
    assert set(out) == set(patch) == FIELDS
    types = {"remind": "number", "keep_recent_turns": "integer", "auto": "boolean", "summarizer_model": "string"}
    for name, kind in types.items():
        assert out[name]["type"] == patch[name]["type"] == kind, name
    assert patch["preserve_patterns"]["items"]["type"] == "string"
    for fields in (out, patch):
        (ref,) = fields["summarizer_provider"]["allOf"]
        assert components[ref["$ref"].rsplit("/", 1)[-1]]["enum"] == ["anthropic", "openai", "offline"]
    assert "errors" in components["ErrorOut"]["properties"]
