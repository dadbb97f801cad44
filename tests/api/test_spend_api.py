"""A project's spend (``GET /projects/{id}/spend/``): each grouping's sums are what the rows add up
to when summed here, a request without a price is counted as unpriced and never as $0, the CSV holds
the JSON's rows, bad parameters answer 400, and only the project's members read it."""

from __future__ import annotations

import csv
import io
from datetime import date, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app.selectors.spend import SPEND_GROUPS, project_spend
from tests.api.spend_rows import NOW, TOKENS, expected, spread

pytestmark = pytest.mark.django_db

SUMS = ("requests", *TOKENS, "unpriced_requests")


@pytest.fixture
def at_now():
    with time_machine.travel(NOW, tick=False):
        yield


def spend(api, team, **params):
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return api.get(f"/api/v1/projects/{team.project.pk}/spend/?{query}")


def as_found(row: dict) -> dict:
    cost = row["cost_usd"]
    return {**{name: row[name] for name in SUMS}, "cost_usd": None if cost is None else Decimal(cost)}


def test_each_grouping_sums_what_its_rows_hold(team, api_as, at_now):
    data = spread(team)
    groups = {
        "owner": (lambda r: r.user_id, lambda row: row["owner"]),
        "key": (lambda r: r.api_key_id, lambda row: row["key"]),
        "model": (lambda r: r.model, lambda row: row["model"]),
        "day": (lambda r: r.created_at.date().isoformat(), lambda row: row["day"]),
    }
    for by, (of_row, of_answer) in groups.items():
        body = spend(api_as(team.carol), team, days=30, by=by).json()  # a viewer reads it
        found = {of_answer(row): as_found(row) for row in body["rows"] if row["requests"]}
        assert found == expected(data.rows, of_row), by
        (total,) = expected(data.rows, lambda r: "all").values()
        assert as_found(body["total"]) == total
    assert total["requests"] == 7 and total["unpriced_requests"] == 1


def test_an_unpriced_model_has_no_cost_and_a_mixed_group_counts_it_apart(team, api_as, at_now):
    spread(team)
    rows = {r["model"]: r for r in spend(api_as(team.alice), team, by="model").json()["rows"]}
    assert rows["mystery-model"]["cost_usd"] is None and rows["mystery-model"]["unpriced_requests"] == 1
    assert rows["mystery-model"]["input_tokens"] == 500  # its tokens count, its cost is unknown
    bob = {r["owner_name"]: r for r in spend(api_as(team.alice), team, by="owner").json()["rows"]}["bob"]
    assert Decimal(bob["cost_usd"]) == Decimal("0.0070") and bob["unpriced_requests"] == 1  # 0.0067 + 0.0003
    assert list(rows) == ["claude-sonnet-4-5", "gpt-4.1", "claude-haiku-4-5", "mystery-model"]  # dearest first


def test_days_are_every_day_of_the_period_oldest_first(team, api_as, at_now):
    spread(team, days=7)
    body = spend(api_as(team.alice), team, days=7, by="day").json()
    days = [row["day"] for row in body["rows"]]
    today = NOW.date()
    assert days == [(today - timedelta(days=n)).isoformat() for n in range(6, -1, -1)]
    assert (body["since"], body["until"], body["days"]) == (days[0], days[-1], 7)
    quiet = [row for row in body["rows"] if not row["requests"]]
    assert quiet and all(Decimal(row["cost_usd"]) == 0 and row["unpriced_requests"] == 0 for row in quiet)
    assert body["rows"][0]["requests"] == 2  # the first day's two requests count; the day before's doesn't


def test_the_owners_and_keys_carry_their_names(team, api_as, at_now):
    data = spread(team)
    keys = {r["key"]: r for r in spend(api_as(team.alice), team, by="key").json()["rows"]}
    ci = keys[data.alice_ci_key.pk]
    assert (ci["key_prefix"], ci["key_name"], ci["key_owner"]) == (data.alice_ci_key.prefix, "=ci runner", "alice")
    assert keys[None]["key_prefix"] == "" and keys[None]["requests"] == 1  # a request made without a key
    owners = {r["owner"]: r["owner_name"] for r in spend(api_as(team.alice), team, by="owner").json()["rows"]}
    assert owners == {team.alice.user.pk: "alice", team.bob.user.pk: "bob"}


@pytest.mark.parametrize("by", SPEND_GROUPS)
def test_the_csv_holds_the_json_rows(team, api_as, at_now, by):
    spread(team)
    api = api_as(team.carol)
    rows = spend(api, team, days=30, by=by).json()["rows"]
    response = spend(api, team, days=30, by=by, format="csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"].startswith('attachment; filename="spend-')
    table = list(csv.DictReader(io.StringIO(response.content.decode())))
    as_text = [{k: "" if v is None else str(v) for k, v in row.items()} for row in rows]
    if by == "key":  # a cell a spreadsheet would run as a formula is quoted
        (quoted,) = [row for row in table if row["key_name"].startswith("'")]
        assert quoted["key_name"] == "'=ci runner"
        quoted["key_name"] = "=ci runner"
    assert table == as_text


def test_one_query_of_the_rollup_per_grouping_however_many_rows(team, at_now):
    spread(team)
    for by in SPEND_GROUPS:
        with CaptureQueriesContext(connection) as queries:
            found = project_spend(project=team.project, days=30, by=by, now=NOW)
        names = 1 if by in ("owner", "key") else 0  # the owners' or keys' names, after the sums
        assert len(queries) == 1 + names and found.total.requests == 7, by
        assert "sessions_app_dailyspend" in queries[0]["sql"], by
        assert not any("sessions_app_providerrequest" in q["sql"] for q in queries), by


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("days=0", "invalid_days"),
        ("days=367", "invalid_days"),
        ("days=two", "invalid_days"),
        ("days=%C2%B2", "invalid_days"),
        ("by=week", "invalid_by"),
        ("by=owner&format=xlsx", "invalid_format"),
    ],
)
def test_bad_parameters_answer_400_naming_the_rule(team, api_as, query, code):
    response = api_as(team.alice).get(f"/api/v1/projects/{team.project.pk}/spend/?{query}")
    assert response.status_code == 400
    assert response.json()["code"] == code and response.json()["detail"]


def test_the_limits_and_defaults_are_accepted(team, api_as, at_now):
    api = api_as(team.alice)
    assert spend(api, team, days=366).json()["since"] == (NOW.date() - timedelta(days=365)).isoformat()
    body = spend(api, team).json()
    assert (body["by"], body["days"], len(body["rows"])) == ("day", 30, 30)
    assert body["total"]["cost_usd"] == "0.0000000000" and date.fromisoformat(body["until"]) == NOW.date()


def test_outsiders_get_404_and_strangers_401(team, api_as, at_now):
    spread(team)
    assert spend(api_as(team.mallory), team, by="owner").status_code == 404
    assert spend(api_as(team.mallory), team, by="owner", format="csv").status_code == 404
    assert api_as(team.alice).get("/api/v1/projects/999999/spend/").status_code == 404
    assert spend(api_as(None), team).status_code == 401
    assert spend(api_as(team.carol), team, format="csv").status_code == 200


def test_the_schema_documents_it_under_spend(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    operation = schema["paths"]["/api/v1/projects/{project_id}/spend/"]["get"]
    assert operation["tags"] == ["spend"] and {"200", "400", "404"} <= set(operation["responses"])
    assert set(operation["responses"]["200"]["content"]) == {"application/json", "text/csv"}
    by = next(p for p in operation["parameters"] if p["name"] == "by")
    assert sorted(by["schema"]["enum"]) == sorted(SPEND_GROUPS)
