"""Lists that must not read a whole big table per page: admin's message and compaction lists, and
the user's session list (issue 16). Each shortcut still answers what the plain query answered."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from compaction.messages import normalize_message
from sessions_app.models import Message
from sessions_app.selectors import access
from sessions_app.services import agent_sessions, ingest, projects
from sessions_app.web import admin_lists

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_sessions(session_of):
    first = session_of(name="first one", external_id="ext-alpha")
    second = session_of(name="second one", external_id="ext-beta")
    for session, n in ((first, 6), (second, 4)):
        turns = [
            normalize_message({"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}", "client_id": f"c{i}"})
            for i in range(n)
        ]
        ingest.message_append(session=session, messages=turns)
    return first, second


def shown(staff, query: str) -> tuple[set[int], list[str]]:
    """The message ids the admin's change list shows, and the SQL it ran."""
    with CaptureQueriesContext(connection) as queries:
        page = staff.get(f"/admin/sessions_app/message/{query}")
    assert page.status_code == 200
    ids = {m.pk for m in page.context["cl"].result_list}
    return ids, [q["sql"] for q in queries.captured_queries]


def test_the_message_list_counts_once_and_asks_no_distinct_values(staff, two_sessions):
    ids, sql = shown(staff, "")
    assert ids == set(Message.objects.values_list("pk", flat=True))
    assert not [q for q in sql if "DISTINCT" in q.upper()]  # the role filter's choices are fixed
    assert len([q for q in sql if "COUNT(" in q.upper()]) == 1  # no second, "full" count


def test_the_role_filter_filters_by_role(staff, two_sessions):
    ids, _ = shown(staff, "?role=assistant")
    assert ids == set(Message.objects.filter(role="assistant").values_list("pk", flat=True)) and len(ids) == 5
    assert shown(staff, "?role=nonsense")[0] == set(Message.objects.values_list("pk", flat=True))


@pytest.mark.parametrize("term", ["first", "ext-alpha", "ALPHA", "{first_id}"])
def test_admin_search_finds_a_sessions_messages_by_its_id_name_or_external_id(staff, two_sessions, term):
    first, _ = two_sessions
    ids, sql = shown(staff, "?q=" + term.format(first_id=first.pk))
    assert ids == set(Message.objects.filter(session=first).values_list("pk", flat=True))
    assert not [q for q in sql if 'UPPER("sessions_app_message".' in q]  # no LIKE over the messages' own columns


@pytest.mark.parametrize("term", ["nothing-like-it", "%25", "9999999999999999999999", "%00x"])
def test_admin_search_for_what_no_session_has_shows_nothing_and_never_fails(staff, two_sessions, term):
    ids, _ = shown(staff, "?q=" + term)
    # Django's search form refuses a NUL and lists everything, as for an empty search.
    assert ids == (set(Message.objects.values_list("pk", flat=True)) if "%00" in term else set())


def test_the_compaction_list_searches_by_session_too(staff, two_sessions):
    page = staff.get("/admin/sessions_app/compaction/?q=ext-beta")
    assert page.status_code == 200 and list(page.context["cl"].result_list) == []


@pytest.mark.postgres  # the estimate is PostgreSQL's planner's
def test_a_big_list_is_counted_from_the_planners_estimate_and_a_small_one_exactly(staff, two_sessions, monkeypatch):
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE sessions_app_message")
    exact = Message.objects.count()
    assert staff.get("/admin/sessions_app/message/").context["cl"].result_count == exact  # under the threshold

    monkeypatch.setattr(admin_lists, "ESTIMATE_ABOVE_ROWS", 0)  # this table is small: pretend it is big
    for query, rows in (("", Message.objects.all()), ("?role=user", Message.objects.filter(role="user"))):
        sql, params = rows.order_by().query.sql_with_params()
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
            plan = cursor.fetchone()[0]
        planned = (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]["Plan Rows"]
        with CaptureQueriesContext(connection) as queries:
            shown = staff.get(f"/admin/sessions_app/message/{query}").context["cl"].result_count
        assert shown == planned
        assert not [q for q in queries.captured_queries if "COUNT(" in q["sql"].upper()]
    # A list that can match nothing has no query to plan: it counts 0, and the page answers.
    assert admin_lists.EstimatedCountPaginator(Message.objects.none(), 100).count == 0


def test_the_session_list_needs_no_distinct_and_counts_each_session_once(team, session_of):
    mine = [session_of(name=f"s{i}") for i in range(3)]
    other = projects.project_create(user=team.alice.user, name="Beta")
    projects.membership_set(project=other, user=team.bob.user, role="viewer")
    agent_sessions.session_create(user=team.alice.user, project=other, name="in beta")
    listed = access.session_list_for(team.bob.user)
    assert "DISTINCT" not in str(listed.query).upper()
    assert listed.count() == len(list(listed)) == 4
    assert {s.pk for s in access.session_list_for(team.bob.user, project=team.project.pk)} == {s.pk for s in mine}
    assert access.session_list_for(team.mallory.user, project=team.project.pk).count() == 0
    assert [p.name for p in access.project_list_for(team.bob.user)] == ["Alpha", "Beta"]
