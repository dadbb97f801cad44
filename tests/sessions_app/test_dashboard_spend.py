"""Spend on the project page (the dashboard's per person, key, model and day tables, read from the
same selector as ``GET /projects/{id}/spend/``) and the session list's owner, key and model filters,
in the API and on the page."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
import time_machine

from tests.api.spend_rows import NOW, spread

pytestmark = pytest.mark.django_db


@pytest.fixture
def at_now():
    with time_machine.travel(NOW, tick=False):
        yield


def spend_table(page: str, by: str) -> str:
    match = re.search(rf'<div class="spend-table" data-by="{by}">(.*?)</div>\s*</div>', page, re.S)
    assert match, by
    return match.group(1)


def test_the_dashboard_shows_the_apis_figures_per_person_key_model_and_day(team, client, api_as, at_now):
    spread(team)
    client.force_login(team.carol.user)  # a viewer sees it
    page = client.get(f"/projects/{team.project.pk}/").content.decode()
    assert "Spend on provider requests, last 14 UTC days" in page
    for by in ("owner", "key", "model", "day"):
        body = api_as(team.carol).get(f"/api/v1/projects/{team.project.pk}/spend/?days=14&by={by}").json()
        table = spend_table(page, by)
        shown = re.findall(r'<tr data-value="[^"]*" data-requests="([\d,]+)" data-cost="([^"]*)">', table)
        wanted = [(f"{r['requests']:,}", r["cost_usd"] or "") for r in body["rows"] if r["requests"]]
        assert shown == wanted, by
        assert f'data-cost="{body["total"]["cost_usd"]}"' in table
        assert f"by={by}&amp;format=csv" in table
    model = spend_table(page, "model")
    assert re.search(r"mystery-model</th>\s*<td>1</td><td>500</td>.*?<td class=\"cost\">—</td>", model, re.S)
    assert "<td>14,000</td>" in model  # sonnet's cache reads, formatted
    owner = spend_table(page, "owner")
    assert "$0.0067" in owner and "+1 unpriced" in owner  # bob: a priced request and an unpriced one
    assert f'href="?owner={team.bob.user.pk}#sessions-h"' in owner


def test_the_dashboard_says_when_nothing_was_proxied(team, client):
    client.force_login(team.alice.user)
    page = client.get(f"/projects/{team.project.pk}/").content.decode()
    assert page.count("No proxied request since") == 4


def test_cost_is_formatted_for_people(team):
    from sessions_app.web.spend_panel import usd

    shown = [usd(Decimal(x)) for x in ("0", "0.0045", "0.00001", "1234.5")]
    assert shown == ["$0.00", "$0.0045", "<$0.0001", "$1,234.50"]
    assert usd(None) == "—"


def test_the_session_list_filters_by_owner_key_and_model(team, api_as, client, at_now):
    data = spread(team)
    api = api_as(team.carol)

    def names(query: str) -> set[str]:
        response = api.get(f"/api/v1/sessions/?project={team.project.pk}&{query}")
        assert response.status_code == 200, response.content
        return {row["name"] for row in response.json()["results"]}

    assert names(f"owner={team.bob.user.pk}") == {"b"}
    assert names(f"owner={team.carol.user.pk}") == set()
    assert names(f"key={data.alice_ci_key.pk}") == {"a"}
    assert names(f"key={data.bob_key.pk}") == {"b"}
    assert names("model=gpt") == {"b"}
    assert names(f"owner={team.alice.user.pk}&model=gpt") == set()
    for query, code in (("owner=bob", "invalid_owner"), ("key=-1", "invalid_key"), ("key=" + "9" * 30, "invalid_key")):
        response = api.get(f"/api/v1/sessions/?{query}")
        assert (response.status_code, response.json()["code"]) == (400, code)
    # Mallory filtering by Bob's key sees none of the project's sessions.
    assert api_as(team.mallory).get(f"/api/v1/sessions/?key={data.bob_key.pk}").json()["count"] == 0

    client.force_login(team.carol.user)
    alices, bobs = (f'href="/sessions/{s.pk}/"' for s in (data.alice_session, data.bob_session))
    page = client.get(f"/projects/{team.project.pk}/?owner={team.bob.user.pk}").content.decode()
    assert bobs in page and alices not in page
    assert f'<option value="{team.bob.user.pk}" selected>bob</option>' in page
    page = client.get(f"/projects/{team.project.pk}/?key={data.alice_ci_key.pk}").content.decode()
    assert alices in page and bobs not in page
