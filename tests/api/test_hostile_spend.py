"""Hostile input against the spend surfaces: per-request lists and CSV, session spend, tokens by tool,
budgets, the ``spawned_by`` filter. Bad input is a 4xx with ``detail`` and ``code`` and writes
nothing; another project's ids are 404s that tell nothing; what is accepted reads back; a CSV cell a
spreadsheet would run is neutralised."""

from __future__ import annotations

import csv
import io
import uuid
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone
from hypothesis import given, settings
from hypothesis import strategies as st

from sessions_app.models import ApiKey, Budget, ProviderRequest, RequestSource
from sessions_app.services import agent_sessions, budgets, spend_rollup
from tests.hypothesis_budget import DATABASE

pytestmark = pytest.mark.django_db

HOSTILE_WORDS = [
    "-1",
    "0",
    "9" * 40,
    "1e3",
    "1.5",
    "0x10",
    "abc",
    "１２",
    "٣",
    "²",
    " 7",
    "+7",
    "1_0",
    "\x00",
    "3\x00",
    "NaN",
    "Infinity",
    "true",
    "🙂",
    "' OR 1=1 --",
    "%00",
    "\u202e12",
]
HOSTILE_PARAM = st.one_of(st.sampled_from(HOSTILE_WORDS), st.text(max_size=12))


def _error(response: Any, status: int = 400) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.content[:300])
    body = response.json()
    assert isinstance(body.get("detail"), str) and body["detail"]
    assert isinstance(body.get("code"), str) and body["code"]
    return body


def _ok_or_400(response: Any, *, page: bool = False) -> None:
    """200, or a 400 with ``detail`` and ``code``; a page past the end or no page number is DRF's 404."""
    allowed = (200, 400, 404) if page else (200, 400)
    assert response.status_code in allowed, (response.status_code, response.content[:300])
    if response.status_code != 200:
        _error(response, response.status_code)
    elif response.streaming:
        b"".join(response.streaming_content)


def _request(session: Any, **fields: Any) -> ProviderRequest:
    defaults: dict[str, Any] = {
        "key": uuid.uuid4(),
        "created_at": timezone.now(),
        "session": session,
        "project_id": session.project_id,
        "user": session.owner,
        "model": "claude-sonnet-4-5",
        "input_tokens": 10,
        "output_tokens": 5,
        "cost_usd": Decimal("0.5"),
        "source": RequestSource.PROXY,
        "status": 200,
    }
    return spend_rollup.request_store(**{**defaults, **fields})


@pytest.fixture
def setting(team):
    """Alice's session with a request, and Mallory's session, key and budget in her own project."""
    mine = agent_sessions.session_create(user=team.alice.user, project=team.project, name="mine", model="m")
    _request(mine)
    mallory_project = team.mallory.user.memberships.get().project
    hers = agent_sessions.session_create(user=team.mallory.user, project=mallory_project, name="hers", model="m")
    _request(hers, cost_usd=Decimal("123.45"), model="secret-model")
    mallory_key = ApiKey.objects.get(user=team.mallory.user)
    her_budget, _ = budgets.budget_create(project=mallory_project, period="day", limit_usd="1.00", key=mallory_key.pk)
    return {
        "mine": mine,
        "hers": hers,
        "her_project": mallory_project,
        "her_key": mallory_key,
        "her_budget": her_budget,
    }


# ----------------------------------------------------------------------------- query parameters


@settings(DATABASE)
@given(value=HOSTILE_PARAM, name=st.sampled_from(["days", "page", "page_size", "format", "by"]))
def test_project_lists_answer_hostile_parameters_with_200_or_a_400(team, api_as, setting, value, name):
    api = api_as(team.alice)
    for path in (f"/api/v1/projects/{team.project.pk}/requests/", f"/api/v1/projects/{team.project.pk}/spend/"):
        _ok_or_400(api.get(path, data={name: value}), page=name == "page")


@settings(DATABASE)
@given(value=HOSTILE_PARAM, name=st.sampled_from(["sub_agents", "page", "page_size", "format"]))
def test_session_surfaces_answer_hostile_parameters_with_200_or_a_400(team, api_as, setting, value, name):
    api = api_as(team.alice)
    pk = setting["mine"].pk
    for tail in ("requests/", "spend/", "tools/"):
        _ok_or_400(api.get(f"/api/v1/sessions/{pk}/{tail}", data={name: value}), page=name == "page")


@settings(DATABASE)
@given(value=HOSTILE_PARAM)
def test_the_spawned_by_filter_answers_hostile_values_with_200_or_a_400(team, api_as, setting, value):
    _ok_or_400(api_as(team.alice).get("/api/v1/sessions/", data={"spawned_by": value}))


@pytest.mark.parametrize("query", ["days=1&days=x", "days=99999999999999999999", "days=367", "days=0", "days=-3"])
def test_a_bad_days_is_a_400_naming_it(team, api_as, query):
    body = _error(api_as(team.alice).get(f"/api/v1/projects/{team.project.pk}/requests/?{query}"))
    assert body["code"] == "invalid_days"


def test_repeated_parameters_read_the_last_one(team, api_as, setting):
    api = api_as(team.alice)
    response = api.get(f"/api/v1/sessions/{setting['mine'].pk}/spend/?sub_agents=nonsense&sub_agents=true")
    assert response.status_code == 200 and response.json()["sub_agents"] is True


# ----------------------------------------------------------------------------- another project's ids


@pytest.mark.parametrize("tail", ["requests/", "requests/?format=csv", "spend/", "spend/?sub_agents=true", "tools/"])
def test_another_projects_session_is_a_404_that_tells_nothing(team, api_as, setting, tail):
    api = api_as(team.alice)
    theirs = api.get(f"/api/v1/sessions/{setting['hers'].pk}/{tail}")
    missing = api.get(f"/api/v1/sessions/999999999/{tail}")
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json() == missing.json()
    assert b"secret-model" not in theirs.content and b"123.45" not in theirs.content


@pytest.mark.parametrize("tail", ["requests/", "requests/?format=csv", "spend/", "budgets/"])
def test_another_projects_lists_are_404s(team, api_as, setting, tail):
    response = api_as(team.alice).get(f"/api/v1/projects/{setting['her_project'].pk}/{tail}")
    assert response.status_code == 404 and b"123.45" not in response.content


def test_the_spawned_by_filter_lists_nothing_of_another_project(team, api_as, setting):
    hers = setting["hers"]
    child = agent_sessions.session_create(
        user=team.mallory.user, project=setting["her_project"], name="child", model="m"
    )
    type(child).objects.filter(pk=child.pk).update(spawned_by=hers)
    body = api_as(team.alice).get(f"/api/v1/sessions/?spawned_by={hers.pk}").json()
    assert body["count"] == 0 and body["results"] == []


def test_another_projects_budget_is_a_404_for_every_method(team, api_as, setting):
    api = api_as(team.alice)
    budget = setting["her_budget"]
    for project in (team.project.pk, setting["her_project"].pk):
        path = f"/api/v1/projects/{project}/budgets/{budget.pk}/"
        assert api.get(path).status_code == 404
        assert api.patch(path, {"limit_usd": "500.00"}).status_code == 404
        assert api.delete(path).status_code == 404
    budget.refresh_from_db()
    assert budget.limit_usd == Decimal("1.00")


def test_a_budget_on_another_projects_key_is_refused_without_telling(team, api_as, setting):
    api = api_as(team.alice)
    theirs = api.post(f"/api/v1/projects/{team.project.pk}/budgets/", {"key": setting["her_key"].pk, "limit_usd": 5})
    missing = api.post(f"/api/v1/projects/{team.project.pk}/budgets/", {"key": 999999999, "limit_usd": 5})
    assert _error(theirs) == _error(missing)
    assert not Budget.objects.filter(project=team.project).exists()


# ----------------------------------------------------------------------------- budget bodies

BAD_BUDGETS: list[Any] = [
    {"limit_usd": "NaN"},
    {"limit_usd": "Infinity"},
    {"limit_usd": "-Infinity"},
    {"limit_usd": "1e400"},
    {"limit_usd": -1},
    {"limit_usd": 0},
    {"limit_usd": "0.001"},
    {"limit_usd": "0.005"},
    {"limit_usd": True},
    {"limit_usd": []},
    {"limit_usd": {"a": 1}},
    {"limit_usd": None},
    {"limit_usd": "１"},
    {"limit_usd": "৪"},  # a Bengali 4, which looks like an 8
    {"limit_usd": "1٫5"},
    {"limit_usd": "1\x00"},
    {"limit_usd": 10**20},
    {"limit_usd": "99999999999.99"},
    {},
    {"limit_usd": 1, "period": "week"},
    {"limit_usd": 1, "period": "\x00"},
    {"limit_usd": 1, "period": None},
    {"limit_usd": 1, "scope": "team"},
    {"limit_usd": 1, "scope": "key"},
    {"limit_usd": 1, "scope": "project", "key": 1},
    {"limit_usd": 1, "key": "abc"},
    {"limit_usd": 1, "key": 1.5},
    {"limit_usd": 1, "key": True},
    {"limit_usd": 1, "key": -1},
    {"limit_usd": 1, "key": 10**30},
    {"limit_usd": 1, "key": [1]},
    {"limit_usd": 1, "refuse": "maybe"},
    {"limit_usd": 1, "refuse": [True]},
    [],
    "limit",
    None,
]


@pytest.mark.parametrize("body", BAD_BUDGETS, ids=[repr(b)[:40] for b in BAD_BUDGETS])
def test_a_bad_budget_is_a_400_and_writes_nothing(team, api_as, body):
    response = api_as(team.alice).post(f"/api/v1/projects/{team.project.pk}/budgets/", body)
    _error(response)
    assert not Budget.objects.filter(project=team.project).exists()


@pytest.mark.parametrize("raw", [b"{", b"\xff\xfe", b'{"limit_usd": 1, "limit_usd": NaN}', b"[" * 5000, b'"\\ud800"'])
def test_a_budget_body_that_is_no_json_is_a_400(team, api_as, raw):
    response = api_as(team.alice).post(f"/api/v1/projects/{team.project.pk}/budgets/", raw)
    _error(response)
    assert not Budget.objects.filter(project=team.project).exists()


@pytest.mark.parametrize("body", [{"limit_usd": "NaN"}, {"limit_usd": -1}, {"refuse": "maybe"}, {"limit_usd": "1e400"}])
def test_a_bad_budget_change_is_a_400_and_changes_nothing(team, api_as, body):
    budget, _ = budgets.budget_create(project=team.project, period="day", limit_usd="2.50")
    response = api_as(team.alice).patch(f"/api/v1/projects/{team.project.pk}/budgets/{budget.pk}/", body)
    _error(response)
    budget.refresh_from_db()
    assert (budget.limit_usd, budget.refuse) == (Decimal("2.50"), False)


def test_nobody_but_an_admin_writes_a_budget_and_bad_input_is_not_read_first(team, api_as):
    budget, _ = budgets.budget_create(project=team.project, period="day", limit_usd="2.50")
    path = f"/api/v1/projects/{team.project.pk}/budgets/"
    for persona, status in ((team.bob, 403), (team.carol, 403), (team.mallory, 404)):
        api = api_as(persona)
        # a body that would be a 400 is refused for the role first: nothing about it is validated
        assert api.post(path, {"limit_usd": "NaN"}).status_code == status
        assert api.post(path, {"limit_usd": 5, "period": "month"}).status_code == status
        assert api.patch(f"{path}{budget.pk}/", {"limit_usd": "9.00"}).status_code == status
        assert api.delete(f"{path}{budget.pk}/").status_code == status
    assert list(Budget.objects.filter(project=team.project).values_list("pk", "limit_usd")) == [
        (budget.pk, Decimal("2.50"))
    ]


@pytest.mark.parametrize("budget_id", ["abc", "-1", "0", "9" * 40, "1.0", "%00", "١"])
def test_hostile_budget_ids_are_404s(team, api_as, budget_id):
    response = api_as(team.alice).get(f"/api/v1/projects/{team.project.pk}/budgets/{budget_id}/")
    assert response.status_code == 404


@settings(DATABASE)
@given(limit=st.decimals(min_value=Decimal("0.01"), max_value=Decimal("9999999999.99"), places=2))
def test_an_accepted_limit_reads_back_exactly(team, api_as, limit):
    Budget.objects.filter(project=team.project).delete()
    api = api_as(team.alice)
    created = api.post(f"/api/v1/projects/{team.project.pk}/budgets/", {"limit_usd": str(limit)})
    assert created.status_code == 201, created.content
    listed = api.get(f"/api/v1/projects/{team.project.pk}/budgets/").json()
    assert [b["limit_usd"] for b in listed] == [f"{limit:.2f}"]
    assert Decimal(listed[0]["spent_usd"]) >= 0 and listed[0]["percent"] >= 0


def test_a_key_with_a_hostile_name_names_its_budget_and_webhook_readably(team, api_as):
    from sessions_app.services import keys

    hostile = '<script>alert(1)</script>=cmd|"\u202e\x07' + "ش" * 300
    key, _ = keys.apikey_create(user=team.alice.user, name=hostile[:100])
    row = ApiKey.objects.get(prefix=key.prefix)
    api = api_as(team.alice)
    created = api.post(f"/api/v1/projects/{team.project.pk}/budgets/", {"key": row.pk, "limit_usd": "0.01"})
    assert created.status_code == 201, created.content
    _request(
        agent_sessions.session_create(user=team.alice.user, project=team.project, name="s", model="m"),
        api_key=row,
        cost_usd=Decimal("0.02"),
    )
    budgets.budgets_check(project=team.project.pk, api_key_id=row.pk)
    listed = api.get(f"/api/v1/projects/{team.project.pk}/budgets/").json()
    assert listed[0]["key"]["name"] == row.name and listed[0]["exceeded"] is True
    assert listed[0]["name"].endswith("…") or row.prefix in listed[0]["name"]


# ----------------------------------------------------------------------------- CSV


# OWASP's list: what a spreadsheet runs when a cell starts with it
FORMULAS = [
    "x\r=1+1",
    "x\n=1+1",
    "=1+1",
    "+1",
    "-1+1",
    "@SUM(A1)",
    "\t=1",
    "\r=1",
    '=HYPERLINK("http://x")',
    "-2+3+cmd|' /C calc'!A0",
]


def _csv(response: Any) -> list[dict[str, str]]:
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def _safe_cell(cell: str) -> bool:
    return cell[:1] not in ("=", "+", "-", "@", "\t", "\r")


@pytest.mark.parametrize("text", FORMULAS)
def test_csv_cells_a_spreadsheet_would_run_are_neutralised(team, api_as, session_of, text):
    session = session_of(model="m")
    _request(session, model=text[:200], service_tier=text[:50])
    api = api_as(team.alice)
    for path in (
        f"/api/v1/sessions/{session.pk}/requests/?format=csv",
        f"/api/v1/projects/{team.project.pk}/requests/?format=csv",
        f"/api/v1/projects/{team.project.pk}/spend/?format=csv&by=model",
    ):
        table = _csv(api.get(path)) if "spend" not in path else _spend_csv(api.get(path))
        assert table, path
        for row in table:
            assert all(_safe_cell(cell) for cell in row.values() if cell), (path, row)
        assert any(text in cell for row in table for cell in row.values()), path  # still readable


def _spend_csv(response: Any) -> list[dict[str, str]]:
    assert response.status_code == 200
    content = b"".join(response.streaming_content) if response.streaming else response.content
    return list(csv.DictReader(io.StringIO(content.decode())))


def test_a_csv_row_holds_exactly_what_json_reads(team, api_as, session_of):
    session = session_of(model="m")
    weird = "模型\u202eltr\x7f" + "x" * 190
    _request(session, model=weird, input_tokens=10**9, cache_read_input_tokens=10**9, cost_usd=Decimal("99999.5"))
    api = api_as(team.alice)
    json_row = api.get(f"/api/v1/sessions/{session.pk}/requests/").json()["results"][0]
    csv_row = _csv(api.get(f"/api/v1/sessions/{session.pk}/requests/?format=csv"))[0]
    assert csv_row["model"] == json_row["model"] == weird
    assert csv_row["input_tokens"] == str(json_row["input_tokens"]) == str(10**9)
    assert Decimal(csv_row["cost_usd"]) == Decimal(json_row["cost_usd"]) == Decimal("99999.5")
    spend = api.get(f"/api/v1/sessions/{session.pk}/spend/").json()
    assert spend["input_tokens"] == 10**9 and Decimal(spend["cost_usd"]) == Decimal("99999.5")


@pytest.mark.parametrize("value", ["１", "৪", "٣.50"])
def test_the_budget_service_refuses_digits_that_are_not_ascii(team, value):
    from sessions_app.errors import InvalidInput

    with pytest.raises(InvalidInput):
        budgets.budget_create(project=team.project, period="day", limit_usd=value)
    assert not Budget.objects.filter(project=team.project).exists()
