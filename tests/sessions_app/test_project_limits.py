"""A project's name and description have limits, in the API and in admin's form: a 400 (or the form's
error) names the field, and nothing is written."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from sessions_app.models import Project
from sessions_app.services.projects import PROJECT_DESCRIPTION_MAX, PROJECT_NAME_MAX

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "n" * (PROJECT_NAME_MAX + 1)}, "name"),
        ({"name": "ok", "description": "d" * (PROJECT_DESCRIPTION_MAX + 1)}, "description"),
    ],
)
def test_the_api_refuses_a_name_or_description_too_long(api_as, team, body, field):
    before = Project.objects.count()
    response = api_as(team.bob).post("/api/v1/projects/", body)
    assert response.status_code == 400
    answer = response.json()
    assert answer["code"] == "max_length" and answer["detail"].startswith(f"{field}:"), answer
    assert Project.objects.count() == before


def test_the_api_takes_both_at_their_limits(api_as, team):
    body = {"name": "n" * PROJECT_NAME_MAX, "description": "d" * PROJECT_DESCRIPTION_MAX}
    response = api_as(team.bob).post("/api/v1/projects/", body)
    assert response.status_code == 201, response.content
    project = Project.objects.get(pk=response.json()["id"])
    assert (len(project.name), len(project.description)) == (PROJECT_NAME_MAX, PROJECT_DESCRIPTION_MAX)


def test_admin_shows_the_error_next_to_the_field_and_writes_nothing(client, team):
    root = get_user_model().objects.create_superuser("root", "root@example.invalid", "root-pass-123")
    client.force_login(root)
    before = Project.objects.count()
    form = {
        "name": "n" * (PROJECT_NAME_MAX + 1),
        "description": "d" * (PROJECT_DESCRIPTION_MAX + 1),
        "created_by": root.pk,
        "memberships-TOTAL_FORMS": "0",
        "memberships-INITIAL_FORMS": "0",
    }
    response = client.post("/admin/sessions_app/project/add/", form)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert f"at most {PROJECT_NAME_MAX} characters" in str(errors["name"])
    assert "at most 10000 characters" in str(errors["description"])
    assert Project.objects.count() == before
    ok = client.post("/admin/sessions_app/project/add/", {**form, "name": "Beta", "description": "short"})
    assert ok.status_code == 302 and Project.objects.filter(name="Beta").exists()


def test_admin_stores_the_context_document_redacted_added_or_changed(client, team):
    """A team pastes into the context document what agents print: a secret in it is replaced as in
    what sessions send, when the project is added and when it is changed."""
    root = get_user_model().objects.create_superuser("root", "root@example.invalid", "root-pass-123")
    client.force_login(root)
    token = "ghp_" + "Zq8mW2xK4vN7bT1cR5yL9pD3fH6jA0sE2uG8"
    form = {"name": "Docs", "description": "", "created_by": root.pk, "context_document": f"Deploy with {token}",
            "memberships-TOTAL_FORMS": "0", "memberships-INITIAL_FORMS": "0"}  # fmt: skip
    assert client.post("/admin/sessions_app/project/add/", form).status_code == 302
    project = Project.objects.get(name="Docs")
    assert token[4:16] not in project.context_document and "[secret:github-token:" in project.context_document
    changed = {**form, "context_document": f"DB_PASSWORD=Qx7pL2vZk9Tm and {token}"}
    assert client.post(f"/admin/sessions_app/project/{project.pk}/change/", changed).status_code == 302
    project.refresh_from_db()
    assert "Qx7pL2vZk9Tm" not in project.context_document and token[4:16] not in project.context_document
