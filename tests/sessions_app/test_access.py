"""Who may do what, via REST: Alice (admin), Bob (member), Carol (viewer), Mallory (outsider)."""

from __future__ import annotations

import pytest

from sessions_app.models import AgentSession, Message, Role
from sessions_app.services import agent_sessions, ingest, keys

pytestmark = pytest.mark.django_db


@pytest.fixture
def session(session_of):
    from compaction.messages import normalize_message

    s = session_of(name="shared")
    ingest.message_append(session=s, messages=[normalize_message({"role": "user", "content": "hi"})])
    return s


READS = ["", "messages/", "status/", "context/", "context/?format=openai"]


@pytest.mark.parametrize("suffix", READS)
def test_every_member_reads_and_outsiders_get_404(team, api_as, session, suffix):
    for persona in (team.alice, team.bob, team.carol):
        assert api_as(persona).get(f"/api/v1/sessions/{session.pk}/{suffix}").status_code == 200
    response = api_as(team.mallory).get(f"/api/v1/sessions/{session.pk}/{suffix}")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_outsider_cannot_find_the_session_by_external_id(team, api_as, session_of):
    s = session_of(external_id="agent-run-7")
    assert api_as(team.bob).get("/api/v1/sessions/agent-run-7/status/").status_code == 200
    assert api_as(team.mallory).get("/api/v1/sessions/agent-run-7/status/").status_code == 404
    assert s.pk


def test_lists_only_show_my_projects_and_sessions(team, api_as, session):
    mine = api_as(team.mallory).get("/api/v1/projects/").json()["results"]
    assert [p["name"] for p in mine] == ["Mallory's own"]
    assert api_as(team.mallory).get("/api/v1/sessions/").json()["results"] == []
    carols = api_as(team.carol).get("/api/v1/sessions/").json()["results"]
    assert [s["id"] for s in carols] == [session.pk]
    assert api_as(team.carol).get("/api/v1/projects/").json()["results"][0]["role"] == "viewer"


def test_viewer_cannot_write_messages_member_can(team, api_as, session):
    body = {"role": "user", "content": "more"}
    denied = api_as(team.carol).post(f"/api/v1/sessions/{session.pk}/messages/", body)
    assert denied.status_code == 403
    assert denied.json()["code"] == "permission_denied"
    assert api_as(team.bob).post(f"/api/v1/sessions/{session.pk}/messages/", body).status_code == 201
    assert api_as(team.mallory).post(f"/api/v1/sessions/{session.pk}/messages/", body).status_code == 404
    assert Message.objects.filter(session=session).count() == 2


def test_creating_sessions_needs_member_role(team, api_as):
    body = {"project": team.project.pk, "name": "new"}
    assert api_as(team.carol).post("/api/v1/sessions/", body).status_code == 403
    assert api_as(team.mallory).post("/api/v1/sessions/", body).status_code == 404
    created = api_as(team.bob).post("/api/v1/sessions/", body)
    assert created.status_code == 201
    assert AgentSession.objects.filter(project=team.project, name="new").count() == 1


def test_only_admins_delete_sessions(team, api_as, session):
    assert api_as(team.bob).delete(f"/api/v1/sessions/{session.pk}/").status_code == 403
    assert api_as(team.mallory).delete(f"/api/v1/sessions/{session.pk}/").status_code == 404
    assert AgentSession.objects.filter(pk=session.pk).exists()
    assert api_as(team.alice).delete(f"/api/v1/sessions/{session.pk}/").status_code == 204
    assert not AgentSession.objects.filter(pk=session.pk).exists()


def test_viewer_cannot_patch_member_can(team, api_as, session):
    assert api_as(team.carol).patch(f"/api/v1/sessions/{session.pk}/", {"name": "x"}).status_code == 403
    response = api_as(team.bob).patch(f"/api/v1/sessions/{session.pk}/", {"name": "renamed", "context_window": 50_000})
    assert response.status_code == 200
    session.refresh_from_db()
    assert (session.name, session.context_window_override) == ("renamed", 50_000)


def test_anonymous_and_bad_keys_are_refused(client, team, session):
    assert client.get(f"/api/v1/sessions/{session.pk}/status/").status_code in (401, 403)
    bad = client.get(f"/api/v1/sessions/{session.pk}/status/", HTTP_AUTHORIZATION="Bearer ctx_not-a-real-key-at-all")
    assert bad.status_code == 401
    assert bad.json()["code"] == "invalid_api_key"


def test_revoked_key_stops_working(client, team, session):
    from sessions_app.models import ApiKey

    ok = client.get(f"/api/v1/sessions/{session.pk}/status/", **team.bob.auth)
    assert ok.status_code == 200
    key = ApiKey.objects.get(user=team.bob.user)
    assert key.last_used_at is not None
    keys.apikey_revoke(key=key)
    assert client.get(f"/api/v1/sessions/{session.pk}/status/", **team.bob.auth).status_code == 401


def test_keys_are_stored_hashed(team):
    from sessions_app.models import ApiKey

    stored = ApiKey.objects.get(user=team.alice.user)
    assert team.alice.key not in (stored.key_hash, stored.prefix)
    assert len(stored.key_hash) == 64
    assert team.alice.key.startswith(stored.prefix)


def test_session_ids_of_other_projects_look_like_missing_ones(team, api_as):
    theirs = agent_sessions.session_create(
        user=team.mallory.user, project=team.mallory.user.projects.get(), name="secret"
    )
    missing = api_as(team.bob).get("/api/v1/sessions/999999999/")
    other = api_as(team.bob).get(f"/api/v1/sessions/{theirs.pk}/")
    assert missing.status_code == other.status_code == 404
    assert missing.json() == other.json()


@pytest.mark.parametrize("ref", ["%C2%B2", "%D9%A1", "%00", "a%00b"])
def test_odd_object_references_are_missing_not_errors(team, api_as, session, ref):
    """Found by the API fuzzer: "²" passed ``str.isdigit`` and then failed ``int()``; a NUL reached
    PostgreSQL, which refuses U+0000 in text. Both answered 500."""
    api = api_as(team.alice)
    for path in ("sessions/{}/", "sessions/{}/status/", "compactions/{}/", "checkpoints/{}/", "handoffs/{}/download/"):
        response = api.get("/api/v1/" + path.format(ref))
        assert (response.status_code, response.json()["code"]) == (404, "not_found"), path


@pytest.mark.parametrize("query", ["q=%00", "q=a%00b&status=active"])
def test_session_searches_holding_nul_match_nothing(team, api_as, session, query):
    response = api_as(team.alice).get(f"/api/v1/sessions/?{query}")
    assert response.status_code == 200
    assert response.json()["results"] == []


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("project=abc", "invalid_project"),
        ("project=-1", "invalid_project"),
        ("project=%D9%A1", "invalid_project"),  # an Arabic-Indic one: int() reads it as 1
        ("project=%C2%B2", "invalid_project"),
        ("status=bogus", "invalid_status"),
        ("status=%00", "invalid_status"),
    ],
)
def test_bad_session_filters_are_a_400_not_an_empty_list(team, api_as, session, query, code):
    response = api_as(team.alice).get(f"/api/v1/sessions/?{query}")
    assert (response.status_code, response.json()["code"]) == (400, code)
    assert response.json()["detail"]


def test_good_session_filters_still_filter(team, api_as, session):
    api = api_as(team.alice)
    assert [r["id"] for r in api.get(f"/api/v1/sessions/?project={team.project.pk}").json()["results"]] == [session.pk]
    assert api.get("/api/v1/sessions/?status=archived").json()["results"] == []
    assert api.get("/api/v1/sessions/?project=&status=").status_code == 200


def test_unrouted_api_paths_answer_json(team, api_as):
    """A path parameter holding "/" matches no route: the 404 is the API's JSON error, not a page."""
    response = api_as(team.alice).get("/api/v1/sessions/a%2Fb/")
    assert response.status_code == 404
    assert response.json() == {"detail": "Not found.", "code": "not_found"}


def test_the_project_to_write_in_is_named_or_the_only_one_and_needs_a_writers_role(team):
    from sessions_app.errors import Forbidden, InvalidInput, NotFound
    from sessions_app.selectors.access import project_find_for
    from sessions_app.services import projects

    bob = team.bob.user
    assert project_find_for(bob, None, min_role=Role.MEMBER) == team.project  # his only project
    assert project_find_for(bob, str(team.project.pk), min_role=Role.MEMBER) == team.project
    assert project_find_for(bob, team.project.name, min_role=Role.MEMBER) == team.project
    for ref in ("no such project", str(2**70), "9" * 30, "a\x00b", "²", str(team.project.pk + 1000)):
        with pytest.raises(NotFound):
            project_find_for(bob, ref, min_role=Role.MEMBER)
    for outsider_ref in (str(team.project.pk), team.project.name):  # another's project is not found, not forbidden
        with pytest.raises(NotFound):
            project_find_for(team.mallory.user, outsider_ref, min_role=Role.MEMBER)
    with pytest.raises(Forbidden):
        project_find_for(team.carol.user, team.project.name, min_role=Role.MEMBER)  # a viewer
    from django.contrib.auth import get_user_model

    with pytest.raises(InvalidInput) as none_of_his:
        project_find_for(get_user_model().objects.create_user("newcomer"), None, min_role=Role.MEMBER)
    assert none_of_his.value.code == "project_required"
    twin = projects.project_create(user=bob, name=team.project.name)
    with pytest.raises(InvalidInput) as several:
        project_find_for(bob, None, min_role=Role.MEMBER)
    assert several.value.code == "project_required"
    with pytest.raises(NotFound, match="use the id"):
        project_find_for(bob, team.project.name, min_role=Role.MEMBER)
    assert project_find_for(bob, str(twin.pk), min_role=Role.MEMBER) == twin
