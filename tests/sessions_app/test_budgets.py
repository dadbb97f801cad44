"""Budgets as recorded spend moves them: each crossing of 80 % and 100 % announced once a period,
however often (or how concurrently) spend is recorded; the UTC day and month; a key's budget blind
to other keys; STATUS's warnings; and what a project without budgets pays for all this (nothing)."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from sessions_app import steps
from sessions_app.models import ApiKey, Budget, DailySpend, ProviderRequest, Webhook, WebhookDelivery
from sessions_app.selectors import budgets as budget_reads
from sessions_app.selectors.usage import session_status
from sessions_app.services import budgets, spend_rollup
from tests.hypothesis_budget import DATABASE

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_budget_flags")]

NOW = datetime(2026, 3, 20, 15, 30, tzinfo=UTC)
EVENTS = ["budget.warning", "budget.exceeded"]


@pytest.fixture
def hook(team):
    return Webhook.objects.create(project=team.project, url="http://127.0.0.1:9/hook", events=EVENTS, enabled=False)


@pytest.fixture
def enabled_hook(hook):
    hook.enabled = True
    hook.save()
    return hook


def key_of(persona) -> ApiKey:
    return ApiKey.objects.get(user=persona.user)


def spend(session, key: ApiKey | None, cost: str, at: datetime = NOW) -> ProviderRequest:
    return spend_rollup.request_store(
        key=uuid.uuid4(),
        session=session,
        project_id=session.project_id,
        api_key=key,
        user_id=key.user_id if key else None,
        created_at=at,
        model="claude-sonnet-4-5",
        cost_usd=Decimal(cost),
    )


def announced(event: str | None = None) -> list[dict]:
    rows = WebhookDelivery.objects.order_by("pk")
    return [row.payload for row in rows if event is None or row.event == event]


def check(team, key: ApiKey | None, at: datetime = NOW) -> bool:
    return budgets.budgets_check(project=team.project.pk, api_key_id=key.pk if key else None, now=at)


def test_a_keys_daily_budget_warns_at_80_and_says_exceeded_at_100_once_each(team, session_of, enabled_hook):
    bob = key_of(team.bob)
    budget, _ = budgets.budget_create(project=team.project, key=bob.pk, period="day", limit_usd="1.00", refuse=True)
    session = session_of()
    for cost, expected in [("0.50", []), ("0.30", ["budget.warning"]), ("0.10", []), ("0.15", ["budget.exceeded"])]:
        before = WebhookDelivery.objects.count()
        spend(session, bob, cost)
        assert check(team, bob) == bool(expected)
        assert [d.event for d in WebhookDelivery.objects.order_by("pk")[before:]] == expected
    for _ in range(5):  # recorded again and again: nothing more to say this period
        spend(session, bob, "0.01")
        assert check(team, bob) is False
    (warning,) = announced("budget.warning")
    (exceeded,) = announced("budget.exceeded")
    assert warning["project"]["id"] == team.project.pk and warning["session"] is None
    assert warning["data"] == {
        "budget": budget.pk,
        "scope": "key",
        "key": {"id": bob.pk, "prefix": bob.prefix, "name": bob.name},
        "period": "day",
        "period_start": "2026-03-20",
        "resets_at": "2026-03-21T00:00:00+00:00",
        "limit_usd": "1.00",
        "spent_usd": "0.8000000000",
        "percent": 80.0,
        "refuse": True,
        "name": f"daily budget of $1.00 for key {bob.prefix}… (test)",
    }
    assert (exceeded["data"]["spent_usd"], exceeded["data"]["percent"]) == ("1.0500000000", 105.0)
    assert bob.key_hash not in str(warning) and team.bob.key not in str(exceeded)  # never the secret


def test_a_jump_past_both_thresholds_announces_both(team, session_of, enabled_hook):
    budgets.budget_create(project=team.project, period="day", limit_usd="2")
    spend(session_of(), key_of(team.alice), "5")
    assert check(team, key_of(team.alice)) is True
    assert [d.event for d in WebhookDelivery.objects.order_by("pk")] == ["budget.warning", "budget.exceeded"]
    assert announced("budget.exceeded")[0]["data"]["percent"] == 250.0


def test_without_a_webhook_the_crossing_is_still_claimed_once(team, session_of, hook):
    budget, _ = budgets.budget_create(project=team.project, period="day", limit_usd="1")
    spend(session_of(), None, "1.5")
    assert check(team, None) is False  # nobody to tell
    budget.refresh_from_db()
    assert budget.warned_period == budget.exceeded_period == NOW.date()
    assert WebhookDelivery.objects.count() == 0


def test_another_keys_budget_is_not_moved_by_this_keys_spend(team, session_of, enabled_hook):
    alice, bob = key_of(team.alice), key_of(team.bob)
    alices, _ = budgets.budget_create(project=team.project, key=alice.pk, period="day", limit_usd="1")
    bobs, _ = budgets.budget_create(project=team.project, key=bob.pk, period="day", limit_usd="1")
    spend(session_of(), bob, "3")
    check(team, bob)
    alices.refresh_from_db()
    bobs.refresh_from_db()
    assert alices.exceeded_period is None and bobs.exceeded_period == NOW.date()
    assert {p["data"]["budget"] for p in announced()} == {bobs.pk}
    assert budget_reads.refusing_budget(team.project.pk, alice.pk, now=NOW) is None
    assert budget_reads.budget_state(alices, now=NOW).spent_usd == 0


def test_a_project_budget_counts_every_key_and_transcript_rows(team, session_of, enabled_hook):
    budget, _ = budgets.budget_create(project=team.project, period="day", limit_usd="1", refuse=True)
    session = session_of()
    spend(session, key_of(team.alice), "0.4")
    spend(session, key_of(team.bob), "0.3")
    spend(session, None, "0.3")  # a transcript's row: no key
    check(team, None)
    assert [p["data"]["scope"] for p in announced()] == ["project", "project"]
    refusing = budget_reads.refusing_budget(team.project.pk, key_of(team.carol).pk, now=NOW)
    assert refusing is not None and refusing.budget == budget and refusing.spent_usd == Decimal("1.0")


def test_periods_are_the_utc_day_and_month(team, session_of, enabled_hook):
    daily, _ = budgets.budget_create(project=team.project, period="day", limit_usd="10")
    monthly, _ = budgets.budget_create(project=team.project, period="month", limit_usd="8")
    session = session_of()
    spend(session, None, "4", at=datetime(2026, 2, 28, 23, 59, tzinfo=UTC))  # last month
    spend(session, None, "3", at=datetime(2026, 3, 1, 0, 0, tzinfo=UTC))  # the month's first moment
    spend(session, None, "2", at=NOW - timedelta(days=1))
    spend(session, None, "1", at=datetime(2026, 3, 20, 0, 0, tzinfo=UTC))
    spend(session, None, "0.5", at=datetime(2026, 3, 21, 0, 0, tzinfo=UTC))  # tomorrow
    day, month = (budget_reads.budget_state(b, now=NOW) for b in (daily, monthly))
    assert (day.period_start, day.spent_usd) == (date(2026, 3, 20), Decimal(1))
    assert (month.period_start, month.spent_usd) == (date(2026, 3, 1), Decimal("6.5"))
    assert month.resets_at == datetime(2026, 4, 1, tzinfo=UTC) and day.resets_at == datetime(2026, 3, 21, tzinfo=UTC)
    assert budget_reads.next_start("month", date(2026, 12, 1)) == date(2027, 1, 1)
    check(team, None, at=NOW)
    assert [(p["data"]["period"], p["event"], p["data"]["percent"]) for p in announced()] == [
        ("month", "budget.warning", 81.3)  # 6.50 of 8.00; the day's 1 of 10 says nothing
    ]


def test_a_new_period_announces_again(team, session_of, enabled_hook):
    budgets.budget_create(project=team.project, period="day", limit_usd="1")
    session = session_of()
    for day in (NOW, NOW + timedelta(days=1)):
        spend(session, None, "1.2", at=day)
        check(team, None, at=day)
    assert [(p["event"], p["data"]["period_start"]) for p in announced()] == [
        ("budget.warning", "2026-03-20"),
        ("budget.exceeded", "2026-03-20"),
        ("budget.warning", "2026-03-21"),
        ("budget.exceeded", "2026-03-21"),
    ]


@hsettings(DATABASE)
@given(costs=st.lists(st.integers(1, 60), min_size=1, max_size=12), repeats=st.integers(1, 3))
def test_each_crossing_is_announced_once_whatever_the_steps(team, session_of, enabled_hook, costs, repeats):
    """Spend in cents, recorded in any steps, each step checked once or more: one warning when the
    total reaches 80 %, one exceeded when it reaches 100 %, each carrying the spend that crossed."""
    Budget.objects.all().delete()
    WebhookDelivery.objects.all().delete()
    ProviderRequest.objects.all().delete()
    DailySpend.objects.all().delete()  # the rollup of the rows just deleted
    budget_reads.forget_project_budgets(team.project.pk)
    budgets.budget_create(project=team.project, period="day", limit_usd="2.50")
    session, total, crossed = session_of(), Decimal(0), {}
    for cents in costs:
        total += Decimal(cents) / 100
        spend(session, None, str(Decimal(cents) / 100))
        for _ in range(repeats):
            check(team, None)
        for event, share in (("budget.warning", Decimal("0.8")), ("budget.exceeded", Decimal(1))):
            if total >= Decimal("2.50") * share:
                crossed.setdefault(event, total)
    found = {p["event"]: Decimal(p["data"]["spent_usd"]) for p in announced()}
    assert len(announced()) == len(found) == len(crossed)
    assert found == crossed


@pytest.mark.postgres  # SQLite's test database takes one writer at a time
@pytest.mark.django_db(transaction=True)
def test_concurrent_recorders_announce_once(team, session_of, enabled_hook):
    budget, _ = budgets.budget_create(project=team.project, period="day", limit_usd="1")
    session = session_of()
    for _ in range(4):
        spend(session, None, "0.3", at=datetime.now(UTC))
    start = threading.Barrier(6)
    errors: list[BaseException] = []

    def recorder() -> None:
        try:
            start.wait()
            steps.spent(team.project.pk, None)
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=recorder) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(d.event for d in WebhookDelivery.objects.all()) == ["budget.exceeded", "budget.warning"]
    budget.refresh_from_db()
    assert budget.exceeded_period == datetime.now(UTC).date()


def test_status_warns_about_the_sessions_budgets_over_80(team, session_of, api_as):
    bob, alice = key_of(team.bob), key_of(team.alice)
    session = session_of()
    with time_machine.travel(NOW, tick=False):
        budgets.budget_create(project=team.project, key=bob.pk, period="day", limit_usd="1")
        budgets.budget_create(project=team.project, key=alice.pk, period="day", limit_usd="0.10")
        whole, _ = budgets.budget_create(project=team.project, period="month", limit_usd="100")
        spend(session, alice, "0.5", at=NOW - timedelta(hours=2))  # alice's key goes over her own budget
        spend(session, bob, "0.85", at=NOW - timedelta(hours=1))  # the session's newest request: bob's key
        check(team, alice)
        check(team, bob)
        warnings = [w for w in session_status(session)["warnings"] if "budget" in w]
        assert warnings == [
            f"Spend is at 80 % of the daily budget of $1.00 for key {bob.prefix}… (test): $0.85 of $1.00 (85 %) "
            "since 2026-03-20; it resets at 2026-03-21 00:00 UTC."
        ]
        spend(session, bob, "0.20", at=NOW)
        check(team, bob)
        answer = api_as(team.carol).get(f"/api/v1/sessions/{session.pk}/status/").json()
        (reached,) = [w for w in answer["warnings"] if "budget" in w]
        assert reached.startswith(f"Spend reached the daily budget of $1.00 for key {bob.prefix}… (test): $1.05 ")
        budgets.budget_update(budget=whole, limit_usd="1.50")  # the project's: $1.55 this month
        answer = api_as(team.carol).get(f"/api/v1/sessions/{session.pk}/status/").json()
        assert [w.split(":")[0] for w in answer["warnings"] if "budget" in w] == [
            f"Spend reached the daily budget of $1.00 for key {bob.prefix}… (test)",
            "Spend reached the monthly budget of $1.50 for project Alpha",
        ]
        assert not [w for w in answer["warnings"] if "$0.10" in w]  # alice's key: not this session's


def test_a_project_without_budgets_pays_no_query_once_its_flag_is_cached(team, session_of):
    session = session_of()
    bob = key_of(team.bob)
    assert check(team, bob) is False  # the flag is read and cached
    with CaptureQueriesContext(connection) as queries:
        assert check(team, bob) is False
        assert budget_reads.refusing_budget(team.project.pk, bob.pk) is None
        assert budget_reads.session_budget_warnings(session) == []
    assert len(queries) == 0


def test_with_budgets_the_proxys_check_is_one_query_until_one_refuses(team, session_of):
    bob = key_of(team.bob)
    budget, _ = budgets.budget_create(project=team.project, key=bob.pk, period="day", limit_usd="1", refuse=True)
    budget_reads.project_has_budgets(team.project.pk)
    with CaptureQueriesContext(connection) as queries:
        assert budget_reads.refusing_budget(team.project.pk, bob.pk) is None
    assert len(queries) == 1
    spend(session_of(), bob, "1", at=datetime.now(UTC))
    check(team, bob, at=datetime.now(UTC))
    refused = budget_reads.refusing_budget(team.project.pk, bob.pk)
    assert refused is not None and refused.budget == budget and refused.percent == 100.0
    budget.refuse = False
    budget.save()
    assert budget_reads.refusing_budget(team.project.pk, bob.pk) is None  # told, not refused


def test_an_imported_transcripts_responses_move_the_project_budget(team, api_as, enabled_hook):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from tests.claude_code_lines import Transcript, text

    lines = Transcript()
    for n in range(3):
        lines.prompt(f"Step {n}, please.")
        lines.response(f"msg_{n}", text(f"Step {n} done."))
    day = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)  # the made-up transcript's day
    with time_machine.travel(day, tick=False):
        budget, _ = budgets.budget_create(project=team.project, period="day", limit_usd="0.01")
        upload = SimpleUploadedFile("s.jsonl", lines.text().encode(), content_type="application/x-ndjson")
        fields = {"file": upload, "format": "claude-code", "project": str(team.project.pk)}
        assert api_as(team.bob).upload("/api/v1/sessions/import/", fields).status_code == 201
    rows = ProviderRequest.objects.filter(project=team.project)
    spent = sum((row.cost_usd or Decimal(0) for row in rows), Decimal(0))
    assert rows.count() == 3 and spent > Decimal("0.01")
    assert [(p["event"], Decimal(p["data"]["spent_usd"])) for p in announced()] == [
        ("budget.warning", spent),
        ("budget.exceeded", spent),
    ]
    assert all(p["data"]["budget"] == budget.pk and p["data"]["period_start"] == "2025-06-01" for p in announced())


def test_django_admin_lists_adds_and_deletes_budgets_through_the_service(team, staff):
    assert staff.get("/admin/sessions_app/budget/add/").status_code == 200
    assert not budget_reads.project_has_budgets(team.project.pk)  # "no budgets", cached
    form = {"project": team.project.pk, "api_key": "", "period": "month", "limit_usd": "12.50", "refuse": "on"}
    assert staff.post("/admin/sessions_app/budget/add/", form).status_code == 302
    budget = Budget.objects.get()
    assert (budget.period, budget.limit_usd, budget.refuse) == ("month", Decimal("12.50"), True)
    assert budget_reads.project_has_budgets(team.project.pk)  # the cached flag followed
    assert staff.get("/admin/sessions_app/budget/").status_code == 200
    assert staff.post(f"/admin/sessions_app/budget/{budget.pk}/delete/", {"post": "yes"}).status_code == 302
    assert not Budget.objects.exists() and not budget_reads.project_has_budgets(team.project.pk)


def test_slacks_format_says_which_budget_and_how_far(team, session_of, enabled_hook):
    from sessions_app.services.webhook_events import slack_payload

    budgets.budget_create(project=team.project, period="month", limit_usd="2")
    spend(session_of(), None, "2.5")
    check(team, None)
    said = [slack_payload(p)["text"] for p in announced()]
    assert said == [
        "[Alpha] spend is at 80 % of the monthly budget of $2.00 for project Alpha: $2.50 (125.0 %) since 2026-03-01",
        "[Alpha] spend reached the monthly budget of $2.00 for project Alpha: $2.50 (125.0 %) since 2026-03-01",
    ]


def test_a_failed_check_leaves_what_was_stored_and_the_next_one_announces(team, session_of, enabled_hook, monkeypatch):
    from django.db import DatabaseError

    budgets.budget_create(project=team.project, period="day", limit_usd="1")
    session = session_of()
    spend(session, None, "1.5", at=datetime.now(UTC))

    def down(**_: object) -> bool:
        raise DatabaseError("the database went away")

    with monkeypatch.context() as patched:
        patched.setattr(budgets, "budgets_check", down)
        steps.spent(team.project.pk, None)  # logged, not raised: the recording is not undone
    assert WebhookDelivery.objects.count() == 0 and ProviderRequest.objects.count() == 1
    steps.spent(team.project.pk, None)
    assert sorted(d.event for d in WebhookDelivery.objects.all()) == ["budget.exceeded", "budget.warning"]


def test_the_hot_reads_say_whether_the_project_has_budgets_and_no_cache_is_asked(team, session_of, monkeypatch):
    from django.core.cache import cache

    from sessions_app.selectors import access, session_rows

    session = session_of()
    other = budgets.budget_create(project=team.project, period="day", limit_usd="1")[0]
    for has in (True, False):
        read = session_rows.session_where("s.id = %s", [session.pk])
        found = access.project_find_for(team.alice.user, str(team.project.pk))
        with monkeypatch.context() as patched:
            patched.setattr(cache, "get", lambda *_: pytest.fail("asked the cache"))
            assert budget_reads.project_has_budgets(read.project) is has
            assert budget_reads.project_has_budgets(budget_reads.session_project(read)) is has
            assert budget_reads.project_has_budgets(found) is has
        if has:
            budgets.budget_delete(budget=other)
    # A session without its project read answers by the project's id, from the cache.
    bare = type(session).objects.get(pk=session.pk)
    assert budget_reads.session_project(bare) == session.project_id
