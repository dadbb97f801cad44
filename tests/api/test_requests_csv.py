"""Per-request rows as CSV (``?format=csv``) for a session and for a project's last days, and the
project's rows as JSON pages: the CSV holds exactly the JSON's rows, streams, quotes what a
spreadsheet would run, and only the project's members read any of it."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app.api.request_views import ProjectRequestOut, ProviderRequestOut
from sessions_app.models import Project, ProviderRequest
from tests.api.spend_rows import NOW, spread
from tests.request_rows import requests_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def at_now():
    with time_machine.travel(NOW, tick=False):
        yield


def every_page(api, path: str) -> list[dict]:
    rows, url = [], f"{path}?page_size=7" if "?" not in path else f"{path}&page_size=7"
    while url:
        body = api.get(url).json()
        rows += body["results"]
        url = body["next"]
    return rows


def table_of(response) -> list[dict]:
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    text = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(text)))


def as_text(rows: list[dict]) -> list[dict]:
    return [{k: "" if v is None else str(v) for k, v in row.items()} for row in rows]


def test_a_sessions_csv_holds_the_json_rows(team, api_as, session_of):
    session = session_of(model="claude-sonnet-4-5")
    requests_in(session, 23)
    api = api_as(team.carol)  # a viewer
    path = f"/api/v1/sessions/{session.pk}/requests/"
    response = api.get(f"{path}?format=csv")
    assert response["Content-Disposition"] == f'attachment; filename="requests-session-{session.pk}.csv"'
    table = table_of(response)
    assert list(table[0]) == ProviderRequestOut.Meta.fields
    assert table == as_text(every_page(api, path)) and len(table) == 23
    assert {r["cost_usd"] for r in table} >= {""} and {r["source"] for r in table} == {"proxy", "transcript"}


def test_a_cell_a_spreadsheet_would_run_is_quoted(team, api_as, session_of):
    session = session_of(model="claude-sonnet-4-5")
    (row,) = requests_in(session, 1)
    ProviderRequest.objects.filter(pk=row.pk).update(model="=HYPERLINK(1)")
    table = table_of(api_as(team.alice).get(f"/api/v1/sessions/{session.pk}/requests/?format=csv"))
    assert table[0]["model"] == "'=HYPERLINK(1)"


def test_the_csv_reads_its_rows_in_a_few_queries(team, api_as, session_of):
    session = session_of(model="claude-sonnet-4-5")
    requests_in(session, 40)
    response = api_as(team.alice).get(f"/api/v1/sessions/{session.pk}/requests/?format=csv")
    with CaptureQueriesContext(connection) as queries:
        lines = b"".join(response.streaming_content).decode().splitlines()
    assert len(lines) == 41 and len(queries) <= 2  # read while it streams, no query per row


def test_a_projects_rows_are_its_last_days_newest_first(team, api_as, at_now):
    data = spread(team, days=30)
    api = api_as(team.carol)
    found = every_page(api, f"/api/v1/projects/{team.project.pk}/requests/?days=30")
    wanted = sorted(data.rows, key=lambda r: (r.created_at, r.pk), reverse=True)
    assert [r["id"] for r in found] == [r.pk for r in wanted]  # not the day before, nor another project's
    assert [(r["session"], r["user"], r["api_key"]) for r in found] == [
        (r.session_id, r.user_id, r.api_key_id) for r in wanted
    ]
    week = every_page(api, f"/api/v1/projects/{team.project.pk}/requests/?days=7")
    assert [r["id"] for r in week] == [r.pk for r in wanted if r.created_at > NOW - timedelta(days=7)]


def test_a_projects_csv_holds_its_json_rows(team, api_as, at_now):
    spread(team, days=30)
    api = api_as(team.bob)
    path = f"/api/v1/projects/{team.project.pk}/requests/"
    response = api.get(f"{path}?days=30&format=csv")
    name = f"requests-project-{team.project.pk}-last-30-days.csv"
    assert response["Content-Disposition"] == f'attachment; filename="{name}"'
    table = table_of(response)
    assert list(table[0]) == ProjectRequestOut.Meta.fields
    assert table == as_text(every_page(api, f"{path}?days=30")) and len(table) == 7


def test_outsiders_get_404_and_learn_nothing(team, api_as, session_of, at_now):
    data = spread(team)
    mallory = api_as(team.mallory)
    for path in (
        f"/api/v1/sessions/{data.alice_session.pk}/requests/?format=csv",
        f"/api/v1/sessions/{data.alice_session.pk}/requests/",
        f"/api/v1/projects/{team.project.pk}/requests/?format=csv",
        f"/api/v1/projects/{team.project.pk}/requests/",
    ):
        response = mallory.get(path)
        assert response.status_code == 404 and not response.streaming, path
        assert set(response.json()) == {"detail", "code"} and b"claude" not in response.content
        assert api_as(None).get(path).status_code == 401
    # Her own project's request is hers alone: it is in her CSV, never in the team's.
    hers = Project.objects.get(name="Mallory's own")
    (own,) = table_of(mallory.get(f"/api/v1/projects/{hers.pk}/requests/?format=csv"))
    team_rows = table_of(api_as(team.alice).get(f"/api/v1/projects/{team.project.pk}/requests/?format=csv"))
    assert own["id"] not in {r["id"] for r in team_rows} and own["input_tokens"] == "77"


@pytest.mark.parametrize(
    ("query", "code"),
    [("format=xlsx", "invalid_format"), ("days=0", "invalid_days"), ("days=367&format=csv", "invalid_days")],
)
def test_bad_parameters_answer_400(team, api_as, session_of, query, code):
    response = api_as(team.alice).get(f"/api/v1/projects/{team.project.pk}/requests/?{query}")
    assert response.status_code == 400 and response.json()["code"] == code
    session = session_of(model="claude-sonnet-4-5")
    bad = api_as(team.alice).get(f"/api/v1/sessions/{session.pk}/requests/?format=pdf")
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_format"


def test_the_schema_documents_both_under_spend(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    for path in ("/api/v1/projects/{project_id}/requests/", "/api/v1/sessions/{session_id}/requests/"):
        operation = schema["paths"][path]["get"]
        assert operation["tags"] == ["spend"] and {"200", "404"} <= set(operation["responses"]), path
        assert set(operation["responses"]["200"]["content"]) == {"application/json", "text/csv"}, path
        names = {p["name"] for p in operation["parameters"]}
        assert {"format", "page", "page_size"} <= names, path
        (fmt,) = [p for p in operation["parameters"] if p["name"] == "format"]
        assert sorted(fmt["schema"]["enum"]) == ["csv", "json"]
    project = schema["paths"]["/api/v1/projects/{project_id}/requests/"]["get"]
    assert "days" in {p["name"] for p in project["parameters"]} and "400" in project["responses"]
    page = project["responses"]["200"]["content"]["application/json"]["schema"]
    assert "results" in str(page) or "$ref" in page
