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
