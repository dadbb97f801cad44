"""The project dashboard (``selectors.dashboard``, the project page, its API): every figure equals
what the rows say when summed another way, Retry is for members only, and the page's queries don't
grow with the number of sessions."""

from __future__ import annotations

import importlib
import json
import re
import uuid
from collections import Counter
from datetime import UTC, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.core.cache import cache
from django.db import connection
from django.db.models import Count, F, Sum
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from compaction.tokens import calibrate
from sessions_app.models import AgentSession, Compaction, DailyIngest, Message
from sessions_app.selectors import usage
from sessions_app.selectors.dashboard import dashboard_payload, project_dashboard
from sessions_app.services import agent_sessions, compaction_records, compaction_runs, projects, spend_rollup
from tests.hypothesis_budget import DATABASE
from tests.sessions_app.compaction_helpers import agent_rounds, append

pytestmark = pytest.mark.django_db


def make(team, name: str, rounds: int, *, model: str = "claude-sonnet-4-5", window: int = 30_000) -> AgentSession:
    session = agent_sessions.session_create(
        user=team.alice.user, project=team.project, name=name, model=model, context_window=window, auto_compact=False
    )
    if rounds:
        append(session, agent_rounds(rounds, seed=len(name), output_lines=60))
    session.refresh_from_db()
    return session


def compact(api, session, level="compact") -> dict:
    response = api.post(f"/api/v1/sessions/{session.pk}/compactions/", {"level": level})
    assert response.status_code == 202, response.content
    return response.json()


def received(sessions, since_seq: dict) -> Counter:
    """(local day, model) → raw tokens of the messages stored since ``since_seq`` (read as they came,
    before any compaction changes them); moves ``since_seq`` on."""
    found: Counter = Counter()
    for session in sessions:
        for row in Message.objects.filter(session=session, seq__gt=since_seq.get(session.pk, 0)):
            found[(timezone.localdate(row.received_at), session.model)] += row.tokens
            since_seq[session.pk] = max(since_seq.get(session.pk, 0), row.seq)
    return found


def test_per_day_figures_are_what_arrived_each_local_day(team, api_as):
    api = api_as(team.bob)
    seen: dict = {}
    three_days_ago = timezone.now() - timedelta(days=3)
    with time_machine.travel(timezone.now() - timedelta(days=30), tick=False):
        ancient = make(team, "ancient", 1)  # outside the 14 days
    with time_machine.travel(three_days_ago, tick=False):
        other = make(team, "other", 6, model="gpt-4o")
    busy = make(team, "busy", 20)
    expected_in = received([ancient, other, busy], seen)
    kept = compact(api, busy)
    Compaction.objects.filter(pk=kept["id"]).update(finished_at=three_days_ago)
    append(busy, agent_rounds(6, start=20, seed=9, output_lines=60))
    expected_in += received([busy], seen)
    undone = compact(api, busy)
    assert api.post(f"/api/v1/compactions/{undone['id']}/revert/").status_code == 200

    board = project_dashboard(project=team.project, days=14)
    ingested: Counter = Counter()
    for (day, model), raw in expected_in.items():
        ingested[day] += calibrate(raw, usage.model_info(model).calibration)
    assert len(board.days) == 14 and board.days[-1].day == timezone.localdate()
    assert [d.day for d in board.days] == sorted({d.day for d in board.days})
    for day in board.days:  # as received: the compactions since took nothing back
        assert day.ingested == ingested.get(day.day, 0), day
    assert {d.day for d in board.days if d.ingested} == {timezone.localdate(three_days_ago), timezone.localdate()}
    # The thirty-day-old messages are outside the window; nothing else is.
    assert sum(d.ingested for d in board.days) == sum(v for k, v in ingested.items() if k >= board.since)
    record = Compaction.objects.get(pk=kept["id"])
    saved = {d.day: d.saved for d in board.days}
    assert saved[timezone.localdate(three_days_ago)] == record.tokens_before - record.tokens_after > 0
    assert saved[timezone.localdate()] == 0  # the compaction of today was reverted
    assert board.compactions["compact"]["succeeded"] == 1 and board.compactions["compact"]["reverted"] == 1


def test_levels_and_closest_are_status_of_the_active_sessions(team):
    sessions = [make(team, f"s{n}", rounds) for n, rounds in enumerate([0, 3, 10, 16, 22])]
    closed = make(team, "closed", 25)
    AgentSession.objects.filter(pk=closed.pk).update(status="archived")
    board = project_dashboard(project=team.project)
    statuses = {s.pk: usage.session_status(s) for s in sessions}
    assert board.levels == {
        level: sum(1 for st in statuses.values() if st["level"] == level)
        for level in ("ok", "remind", "compact", "summarize", "handoff")
    }
    ranked = sorted((s for s in sessions if statuses[s.pk]["used"]), key=lambda s: -statuses[s.pk]["usage_percent"])
    assert [u.session.pk for u in board.closest] == [s.pk for s in ranked[:5]]
    assert all(u.usage_percent == statuses[u.session.pk]["usage_percent"] for u in board.closest)
    assert closed.pk not in {u.session.pk for u in board.closest}


def test_cost_is_the_spend_of_the_dashboards_days_and_follows_new_requests(team):
    """The card's figure is the requests' own cost over the dashboard's UTC days, summed here from the
    rows: a request before them, or another project's, counts nowhere; an unpriced one is named."""
    priced, other = make(team, "a", 2), make(team, "b", 2, model="someones-own-model")
    now = timezone.now()

    def request(session, at, cost):
        return spend_rollup.request_store(
            key=uuid.uuid4(), session=session, project=session.project, user=session.owner, created_at=at,
            model=session.model, input_tokens=10, output_tokens=5, cost_usd=cost, status=200,
        )  # fmt: skip

    rows = [request(priced, now - timedelta(days=2), Decimal("1.2345")), request(other, now, None)]
    request(priced, now - timedelta(days=20), Decimal(50))  # before the 14 days
    cost = project_dashboard(project=team.project).cost
    expected = sum((r.cost_usd for r in rows if r.cost_usd is not None), Decimal(0))
    assert cost.dollars == expected.quantize(Decimal("0.01")) == Decimal("1.23")
    assert (cost.requests, cost.unpriced_requests, cost.unpriced_models) == (2, 1, ["someones-own-model"])
    assert cost.since == timezone.now().astimezone(UTC).date() - timedelta(days=13)
    request(priced, now, Decimal("0.01"))
    assert project_dashboard(project=team.project).cost.dollars == Decimal("1.24")


def failing(session: AgentSession, times: int) -> None:
    for _ in range(times):
        record = compaction_runs.compaction_request(session=session, level="summarize", user=None, trigger="auto")
        compaction_records.compaction_fail(record.pk, "summarizer: 529 overloaded")


def test_failed_and_paused_sessions_are_listed_and_members_may_retry(team, client):
    paused, failed, fine = make(team, "paused", 22), make(team, "failed", 22), make(team, "fine", 22)
    failing(paused, 3)
    failing(failed, 1)
    paused.refresh_from_db()
    assert paused.auto_paused
    board = project_dashboard(project=team.project)
    trouble = {t.session.pk: t for t in board.trouble}
    assert set(trouble) == {paused.pk, failed.pk}
    assert trouble[paused.pk].paused and not trouble[failed.pk].paused
    assert trouble[failed.pk].error == "summarizer: 529 overloaded" and trouble[failed.pk].level == "summarize"
    assert fine.pk not in trouble

    client.force_login(team.carol.user)  # a viewer: no button, and the server refuses
    page = client.get(f"/projects/{team.project.pk}/").content.decode()
    assert f'action="/sessions/{paused.pk}/retry/"' not in page and "summarizer: 529 overloaded" in page
    count = Compaction.objects.count()
    assert client.post(f"/sessions/{paused.pk}/retry/").status_code == 403
    assert Compaction.objects.count() == count
    client.force_login(team.mallory.user)
    assert client.post(f"/sessions/{paused.pk}/retry/").status_code == 404
    assert Compaction.objects.count() == count

    client.force_login(team.bob.user)  # a member: the button, and the retry runs (in-process here)
    assert f'action="/sessions/{paused.pk}/retry/"' in client.get(f"/projects/{team.project.pk}/").content.decode()
    response = client.post(f"/sessions/{paused.pk}/retry/")
    assert response.status_code == 302 and response["Location"].endswith(f"/projects/{team.project.pk}/#dashboard")
    retried = Compaction.objects.filter(session=paused).order_by("-pk").first()
    assert (retried.level, retried.trigger, retried.status) == ("summarize", "manual", "succeeded")
    assert retried.requested_by == team.bob.user
    paused.refresh_from_db()
    assert not paused.auto_paused
    assert paused.pk not in {t.session.pk for t in project_dashboard(project=team.project).trouble}


def test_another_projects_compactions_and_trouble_count_nowhere(team):
    """Compactions carry their session's project (the dashboard reads them by it): another project's
    failed, paused and succeeded ones are in its own dashboard only, and every path that creates one
    sets it (checked over every row the flows below made)."""
    theirs = projects.project_create(user=team.alice.user, name="Beta")
    ours = make(team, "ours", 22)
    other = agent_sessions.session_create(
        user=team.alice.user, project=theirs, name="theirs", context_window=30_000, auto_compact=False
    )
    append(other, agent_rounds(22, seed=3, output_lines=60))
    failing(other, 3)  # failed three times: paused
    record = compaction_runs.compaction_request(session=ours, level="compact", user=None)
    compaction_runs.compaction_run(record.pk)
    assert not Compaction.objects.exclude(project_id=F("session__project_id")).exists()
    assert Compaction.objects.filter(project=theirs).count() == 3

    mine, yours = project_dashboard(project=team.project), project_dashboard(project=theirs)
    assert mine.trouble == [] and [t.session.pk for t in yours.trouble] == [other.pk]
    assert yours.trouble[0].paused and yours.trouble[0].error == "summarizer: 529 overloaded"
    assert mine.compactions["compact"]["succeeded"] == 1 and mine.compactions["summarize"]["failed"] == 0
    assert yours.compactions["summarize"]["failed"] == 3 and yours.compactions["compact"]["succeeded"] == 0
    assert sum(d.saved for d in mine.days) == Compaction.objects.get(pk=record.pk).saved_tokens > 0
    assert sum(d.saved for d in yours.days) == 0


def test_the_project_page_reads_the_same_number_of_rows_whatever_the_sessions(team, client):
    client.force_login(team.alice.user)

    def queries() -> int:
        cache.clear()  # cold
        usage.forget_model_profiles()
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(f"/projects/{team.project.pk}/").status_code == 200
        return len(ctx.captured_queries)

    for n in range(3):
        make(team, f"few{n}", 2)
    few = queries()
    for n in range(27):
        make(team, f"many{n}", 2)
    assert queries() == few


def test_api_answers_the_page_numbers_to_members_only(team, api_as, client):
    make(team, "a", 10)
    expected = json.loads(json.dumps(dashboard_payload(project_dashboard(project=team.project))))
    for persona in (team.alice, team.bob, team.carol):
        response = api_as(persona).get(f"/api/v1/projects/{team.project.pk}/dashboard/")
        assert response.status_code == 200 and response.json() == expected
    assert api_as(team.mallory).get(f"/api/v1/projects/{team.project.pk}/dashboard/").status_code == 404
    for bad in ("0", "91", "x", "-1", "1.5"):
        response = api_as(team.alice).get(f"/api/v1/projects/{team.project.pk}/dashboard/?days={bad}")
        assert (response.status_code, response.json()["code"]) == (400, "invalid_days")
    assert len(api_as(team.alice).get(f"/api/v1/projects/{team.project.pk}/dashboard/?days=3").json()["days"]) == 3
    client.force_login(team.carol.user)
    html = client.get(f"/projects/{team.project.pk}/").content.decode()
    assert '<title id="daily-title">' in html and '<desc id="daily-desc">' in html
    drawn = re.findall(r'<g class="day" data-day="([\d-]+)" data-ingested="(\d+)" data-saved="(\d+)">', html)
    assert drawn == [(d["day"], str(d["ingested"]), str(d["saved"])) for d in expected["days"]]
    listed = re.findall(r'<tr data-day="([\d-]+)"><td>[\d-]+</td><td>(\d+)</td><td>(\d+)</td></tr>', html)
    assert listed == drawn
    for level, n in expected["levels"].items():
        assert re.search(rf'<li data-level="{level}">.*?<strong class="count">{n}</strong>', html)


@hsettings(DATABASE)
@given(sizes=st.lists(st.integers(1, 6), min_size=1, max_size=6), resend=st.integers(0, 3))
def test_the_daily_figures_are_the_messages_stored_however_they_were_batched_or_resent(team, sizes, resend):
    project = projects.project_create(user=team.alice.user, name="batched")
    session = agent_sessions.session_create(user=team.alice.user, project=project, name="s", auto_compact=False)
    turns = [{**m, "client_id": f"c{i}"} for i, m in enumerate(agent_rounds(10, seed=sum(sizes)))]
    start = 0
    for size in sizes:
        batch = turns[start : start + size]
        if not batch:
            break
        append(session, batch)
        append(session, batch[:resend])  # an agent's retry: stored once, counted once
        start += size
    stored = Message.objects.filter(session=session).aggregate(tokens=Sum("tokens"), n=Count("pk"))
    figures = DailyIngest.objects.filter(project=project).aggregate(tokens=Sum("tokens"), n=Sum("messages"))
    assert (figures["tokens"], figures["n"]) == (stored["tokens"], stored["n"])
    assert set(DailyIngest.objects.filter(project=project).values_list("day", "model")) == {
        (timezone.localdate(), session.model)
    }


def test_the_migration_fills_the_daily_figures_from_the_messages_already_stored(team, session_of):
    from django.apps import apps

    backfill = importlib.import_module("sessions_app.migrations.0016_daily_ingest").backfill
    first, second = session_of(name="a"), session_of(name="b", model="gpt-4o")
    yesterday = timezone.now() - timedelta(days=1)
    for seq, (session, tokens) in enumerate([(first, 5), (first, 7), (second, 11)], start=1):
        Message.objects.create(session=session, seq=seq, role="user", content="x", tokens=tokens, created_at=yesterday)
    Message.objects.filter(session=first, seq=1).update(received_at=yesterday)
    DailyIngest.objects.all().delete()
    backfill(apps, None)  # it uses no schema editor
    rows = set(DailyIngest.objects.filter(project=team.project).values_list("day", "model", "tokens", "messages"))
    assert rows == {
        (timezone.localdate(yesterday), first.model, 5, 1),
        (timezone.localdate(), first.model, 7, 1),
        (timezone.localdate(), "gpt-4o", 11, 1),
    }
