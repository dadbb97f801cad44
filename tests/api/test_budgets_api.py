"""``/api/v1/projects/{id}/budgets/``: members read a project's budgets with this period's spend, its
admins add, change and delete them; bad input answers 400 with a code and writes nothing; anyone
outside the project gets 404."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from decimal import Decimal

import pytest
import time_machine

from sessions_app.models import ApiKey, Budget
from sessions_app.selectors import budgets as budget_reads
from sessions_app.services import spend_rollup

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_budget_flags")]

NOW = datetime(2026, 3, 20, 15, 30, tzinfo=UTC)


@pytest.fixture
def at_now():
    with time_machine.travel(NOW, tick=False):
        yield


def url(team, budget_id=None) -> str:
    base = f"/api/v1/projects/{team.project.pk}/budgets/"
    return base if budget_id is None else f"{base}{budget_id}/"


def add(api, team, **body):
    return api.post(url(team), {"period": "day", "limit_usd": "1.00", **body})


def test_an_admin_adds_budgets_and_members_read_them_with_the_periods_spend(team, api_as, session_of, at_now):
    bob = ApiKey.objects.get(user=team.bob.user)
    keyed = add(api_as(team.alice), team, key=bob.pk, refuse=True)
    assert keyed.status_code == 201, keyed.content
    whole = add(api_as(team.alice), team, period="month", limit_usd="250")
    assert whole.status_code == 201, whole.content
    spend_rollup.request_store(
        key=uuid.uuid4(),
        session=session_of(),
        project=team.project,
        api_key=bob,
        created_at=NOW,
        cost_usd=Decimal("0.42"),
    )
    listed = api_as(team.carol).get(url(team))  # a viewer reads them
    assert listed.status_code == 200
    first, second = listed.json()
    assert first == {
        "id": keyed.json()["id"],
        "project": team.project.pk,
        "scope": "key",
        "key": {"id": bob.pk, "prefix": bob.prefix, "name": "test"},
        "period": "day",
        "limit_usd": "1.00",
        "refuse": True,
        "name": f"daily budget of $1.00 for key {bob.prefix}… (test)",
        "period_start": "2026-03-20",
        "resets_at": "2026-03-21T00:00:00+00:00",
        "spent_usd": "0.4200000000",
        "percent": 42.0,
        "warned": False,
        "exceeded": False,
        "created_at": first["created_at"],
    }
    assert (second["scope"], second["key"]) == ("project", None)
    assert (second["period"], second["limit_usd"]) == ("month", "250.00")
    assert (second["period_start"], second["resets_at"]) == ("2026-03-01", "2026-04-01T00:00:00+00:00")
    assert (second["spent_usd"], second["percent"]) == ("0.4200000000", 0.2)
    one = api_as(team.bob).get(url(team, first["id"]))
    assert one.status_code == 200 and one.json() == first


def test_patching_the_limit_takes_back_a_crossing_it_no_longer_reaches(team, api_as, session_of, at_now):
    created = add(api_as(team.alice), team, limit_usd="0.50", refuse=True).json()
    spend_rollup.request_store(
        key=uuid.uuid4(), session=session_of(), project=team.project, created_at=NOW, cost_usd=Decimal("0.60")
    )
    lowered = api_as(team.alice).patch(url(team, created["id"]), {"limit_usd": "0.55"})
    assert lowered.status_code == 200 and (lowered.json()["warned"], lowered.json()["exceeded"]) == (True, True)
    assert budget_reads.refusing_budget(team.project.pk, None) is not None
    raised = api_as(team.alice).patch(url(team, created["id"]), {"limit_usd": "10"})
    body = raised.json()
    assert (body["limit_usd"], body["warned"], body["exceeded"], body["percent"]) == ("10.00", False, False, 6.0)
    assert budget_reads.refusing_budget(team.project.pk, None) is None
    off = api_as(team.alice).patch(url(team, created["id"]), {"refuse": False})
    assert off.json()["refuse"] is False and off.json()["limit_usd"] == "10.00"


def test_delete_removes_it(team, api_as):
    created = add(api_as(team.alice), team).json()
    assert api_as(team.alice).delete(url(team, created["id"])).status_code == 204
    assert not Budget.objects.exists()
    assert api_as(team.alice).get(url(team, created["id"])).status_code == 404


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"limit_usd": "0"}, "invalid_limit_usd"),
        ({"limit_usd": "-1"}, "invalid_limit_usd"),
        ({"limit_usd": "1.005"}, "invalid_limit_usd"),
        ({"limit_usd": "lots"}, "invalid_limit_usd"),
        ({"limit_usd": None}, "invalid_limit_usd"),
        ({"period": "week"}, "invalid_period"),
        ({"scope": "key"}, "invalid_key"),
        ({"scope": "project", "key": "ALICE"}, "invalid_key"),
        ({"key": "MALLORY"}, "invalid_key"),
        ({"key": 987654}, "invalid_key"),
        ({"key": "x"}, "invalid_key"),
        ({"refuse": "maybe"}, "invalid_refuse"),
    ],
)
def test_bad_input_answers_400_with_a_code_and_writes_nothing(team, api_as, body, code):
    keys = {
        name: ApiKey.objects.get(user=persona.user).pk
        for name, persona in [("ALICE", team.alice), ("MALLORY", team.mallory)]
    }
    body = {k: keys.get(v, v) if isinstance(v, str) else v for k, v in body.items()}
    response = add(api_as(team.alice), team, **body)
    assert response.status_code == 400, response.content
    assert response.json()["code"] == code and response.json()["detail"]
    assert not Budget.objects.exists()


def test_a_second_budget_of_the_same_scope_and_period_is_refused(team, api_as):
    bob = ApiKey.objects.get(user=team.bob.user).pk
    assert add(api_as(team.alice), team).status_code == 201
    assert add(api_as(team.alice), team, key=bob).status_code == 201
    assert add(api_as(team.alice), team, period="month").status_code == 201
    for again in ({}, {"key": bob}, {"scope": "project", "limit_usd": "5"}):
        response = add(api_as(team.alice), team, **again)
        assert response.status_code == 400 and response.json()["code"] == "duplicate_budget", again
    assert Budget.objects.count() == 3


def test_a_bad_patch_changes_nothing(team, api_as):
    created = add(api_as(team.alice), team).json()
    for body in ({"limit_usd": "0"}, {"limit_usd": "-3"}, {"refuse": "perhaps"}):
        response = api_as(team.alice).patch(url(team, created["id"]), body)
        assert response.status_code == 400 and response.json()["code"].startswith("invalid_"), body
    budget = Budget.objects.get()
    assert (budget.limit_usd, budget.refuse) == (Decimal("1.00"), False)


def test_only_admins_write_and_outsiders_see_nothing(team, api_as):
    created = add(api_as(team.alice), team).json()
    for persona in (team.bob, team.carol):  # members and viewers read, never write
        api = api_as(persona)
        assert add(api, team, period="month").status_code == 403
        assert api.patch(url(team, created["id"]), {"limit_usd": "9"}).status_code == 403
        assert api.delete(url(team, created["id"])).status_code == 403
    mallory = api_as(team.mallory)
    assert mallory.get(url(team)).status_code == 404
    assert mallory.get(url(team, created["id"])).status_code == 404
    assert add(mallory, team, period="month").status_code == 404
    assert mallory.patch(url(team, created["id"]), {"limit_usd": "9"}).status_code == 404
    assert mallory.delete(url(team, created["id"])).status_code == 404
    assert api_as(None).get(url(team)).status_code in (401, 403)
    budget = Budget.objects.get()
    assert (budget.period, budget.limit_usd) == ("day", Decimal("1.00"))


def test_a_budget_is_found_only_under_its_own_project(team, api_as):
    from sessions_app.models import Project

    created = add(api_as(team.alice), team).json()
    mallorys = Project.objects.get(name="Mallory's own")
    other = api_as(team.mallory).get(f"/api/v1/projects/{mallorys.pk}/budgets/{created['id']}/")
    assert other.status_code == 404  # her own project's path, another project's budget
    assert api_as(team.alice).get(url(team, "nope")).status_code == 404
