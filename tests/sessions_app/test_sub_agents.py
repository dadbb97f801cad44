"""Sub-agents' sessions under the session whose agent started them (``spawned_by``): set on import,
on the hook's upload and by the proxy's link; shown in the REST list, the project page and the
session page; spend with them; and filled from ``sidechain_of`` by migration 0034."""

from __future__ import annotations

import re
import uuid
from decimal import Decimal

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.template.defaultfilters import floatformat

from compaction.transcripts import read_transcript
from sessions_app.models import SIDECHAIN_OF, AgentSession
from sessions_app.selectors.spend import session_spend
from sessions_app.services import agent_sessions, importing, projects, spend_rollup
from tests.claude_code_lines import SESSION, agent_session


def _imported(team) -> importing.ImportResult:
    data = agent_session(2, sub_agent=True).text()
    return importing.session_import(
        user=team.alice.user,
        project=team.project,
        transcript=read_transcript(data, "claude-code"),
        name="main work",
    )


@pytest.mark.django_db
def test_an_import_links_each_sub_agent_to_its_main_session(team):
    result = _imported(team)
    (side,) = result.sidechains
    side.refresh_from_db()
    assert side.spawned_by_id == result.session.pk and side.metadata[SIDECHAIN_OF] == result.session.pk
    assert list(result.session.sub_agents.all()) == [side]
    assert result.session.spawned_by_id is None


@pytest.mark.django_db
def test_the_hooks_upload_links_them_too(team, api_as):
    data = agent_session(2, sub_agent=True).text()
    body = {"project": str(team.project.pk), "external_id": SESSION, "offset": 0, "lines": data, "final": True}
    answer = api_as(team.bob).post("/api/v1/sessions/transcript/", body).json()
    (side_id,) = answer["sidechains"]
    assert AgentSession.objects.get(pk=side_id).spawned_by_id == answer["session"]


@pytest.mark.django_db
def test_a_sidechain_of_another_projects_session_links_nothing(team):
    elsewhere = projects.project_create(user=team.mallory.user, name="Elsewhere")
    theirs = agent_sessions.session_create(user=team.mallory.user, project=elsewhere, name="theirs")
    made = agent_sessions.session_create(
        user=team.alice.user, project=team.project, name="side", metadata={SIDECHAIN_OF: theirs.pk}
    )
    assert made.spawned_by_id is None


@pytest.mark.django_db
def test_the_rest_list_says_who_started_whom_and_filters_by_it(team, api_as):
    result = _imported(team)
    main, side = result.session, result.sidechains[0]
    bob = api_as(team.bob)
    rows = {r["id"]: r for r in bob.get(f"/api/v1/sessions/?project={team.project.pk}").json()["results"]}
    assert (rows[main.pk]["sub_agents"], rows[main.pk]["spawned_by"]) == (1, None)
    assert (rows[side.pk]["sub_agents"], rows[side.pk]["spawned_by"]) == (0, main.pk)
    only = bob.get(f"/api/v1/sessions/?spawned_by={main.pk}").json()["results"]
    assert [r["id"] for r in only] == [side.pk]
    assert bob.get(f"/api/v1/sessions/{side.pk}/").json()["spawned_by"] == main.pk
    refused = bob.get("/api/v1/sessions/?spawned_by=x")
    assert refused.status_code == 400 and refused.json()["code"] == "invalid_spawned_by"
    # Mallory sees none of them, whatever she asks for.
    assert api_as(team.mallory).get(f"/api/v1/sessions/?spawned_by={main.pk}").json()["results"] == []


@pytest.mark.django_db
def test_the_project_page_shows_the_sub_agents_under_their_session(team, client):
    main = _imported(team).session
    client.force_login(team.carol.user)
    page = client.get(f"/projects/{team.project.pk}/").content.decode()
    assert f'<a href="/sessions/{main.pk}/#sub-agents">1 sub-agent</a>' in page
    assert re.search(rf'sub-agent of <a href="/sessions/{main.pk}/">main work</a>', page)


@pytest.mark.django_db
def test_the_session_page_lists_its_sub_agents_and_spends_with_them(team, client):
    result = _imported(team)
    main, side = result.session, result.sidechains[0]
    for session, cost in ((main, "0.25"), (side, "0.5")):
        spend_rollup.request_store(
            key=uuid.uuid4(),
            session=session,
            project=team.project,
            created_at=session.created_at,
            model=session.model,
            input_tokens=100,
            output_tokens=10,
            cost_usd=Decimal(cost),
        )
    alone = session_spend(main)
    together = session_spend(main, with_sub_agents=True)
    assert together.cost_usd - alone.cost_usd == session_spend(side).cost_usd
    assert together.requests == alone.requests + session_spend(side).requests
    client.force_login(team.carol.user)
    page = client.get(f"/sessions/{main.pk}/").content.decode()
    assert 'id="sub-agents"' in page and f'href="/sessions/{side.pk}/"' in page
    assert f'data-spend="with-sub-agents">${floatformat(together.cost_usd, 4)}<' in page
    assert f'data-spend="alone">${floatformat(alone.cost_usd, 4)}<' in page
    side_page = client.get(f"/sessions/{side.pk}/").content.decode()
    assert f'sub-agent of <a href="/sessions/{main.pk}/">main work</a>' in side_page
    assert 'id="sub-agents"' not in side_page


@pytest.mark.django_db
def test_the_spend_endpoint_sums_with_sub_agents_on_request(team, api_as):
    result = _imported(team)
    main = result.session
    bob = api_as(team.bob)
    alone = bob.get(f"/api/v1/sessions/{main.pk}/spend/").json()
    together = bob.get(f"/api/v1/sessions/{main.pk}/spend/?sub_agents=true").json()
    assert alone["sub_agents"] is False and together["sub_agents"] is True
    expected = session_spend(main, with_sub_agents=True)
    assert together["requests"] == expected.requests and Decimal(together["cost_usd"]) == expected.cost_usd
    assert together["input_tokens"] >= alone["input_tokens"]
    assert bob.get(f"/api/v1/sessions/{main.pk}/spend/?sub_agents=maybe").json()["code"] == "invalid_sub_agents"
    assert api_as(team.mallory).get(f"/api/v1/sessions/{main.pk}/spend/").status_code == 404


def test_the_backfill_links_what_metadata_names_in_the_same_project_only(transactional_db):
    before, after = [("sessions_app", "0033_session_harness")], [("sessions_app", "0034_spawned_by")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    Project = old.get_model("sessions_app", "Project")
    Session = old.get_model("sessions_app", "AgentSession")
    mine, other = Project.objects.create(name="mine"), Project.objects.create(name="other")
    main = Session.objects.create(project=mine, name="main")
    foreign = Session.objects.create(project=other, name="foreign")
    side = Session.objects.create(project=mine, name="side", metadata={SIDECHAIN_OF: main.pk})
    stray = Session.objects.create(project=mine, name="stray", metadata={SIDECHAIN_OF: foreign.pk})
    gone = Session.objects.create(project=mine, name="gone", metadata={SIDECHAIN_OF: 10**9})
    odd = Session.objects.create(project=mine, name="odd", metadata={SIDECHAIN_OF: "x"})
    executor = MigrationExecutor(connection)
    executor.migrate(after)
    new = executor.loader.project_state(after).apps.get_model("sessions_app", "AgentSession")
    linked = dict(new.objects.filter(project_id=mine.pk).values_list("name", "spawned_by_id"))
    assert linked == {"main": None, "side": main.pk, "stray": None, "gone": None, "odd": None}
    assert {side.pk, stray.pk, gone.pk, odd.pk} <= set(new.objects.values_list("pk", flat=True))
    # Back to the newest schema: the tests after this one use this database too.
    latest = MigrationExecutor(connection)
    latest.migrate(latest.loader.graph.leaf_nodes())
