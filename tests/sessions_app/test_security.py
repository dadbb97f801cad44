"""OWASP API Top 10 cases that apply here, beyond tests/sessions_app/test_access.py (object-level
authorization) and test_throttling.py (resource consumption)."""

from __future__ import annotations

import logging

import pytest

from sessions_app.models import AgentSession, Message, Project

pytestmark = pytest.mark.django_db


def test_mass_assignment_of_owner_project_and_counters_is_ignored_or_refused(api_as, team):
    """API3: fields a client must not set (owner, totals, seq, status on create) are not taken."""
    bob = api_as(team.bob)
    other = Project.objects.get(name="Mallory's own")
    created = bob.post(
        "/api/v1/sessions/",
        {
            "project": team.project.pk,
            "name": "s",
            "owner": team.mallory.user.pk,
            "message_tokens": 5,
            "last_seq": 99,
            "status": "archived",
            "id": 424242,
        },
    )
    assert created.status_code == 201, created.content
    session = AgentSession.objects.get(pk=created.json()["id"])
    assert session.pk != 424242 and session.owner == team.bob.user
    assert (session.message_tokens, session.last_seq, session.status) == (0, 0, "active")
    # Moving a session into a project the caller can't see is refused like a missing project.
    moved = bob.patch(f"/api/v1/sessions/{session.pk}/", {"project": other.pk})
    session.refresh_from_db()
    assert session.project_id == team.project.pk
    assert moved.status_code == 200  # project is not a field PATCH takes: ignored
    # A message can't choose its seq, state, token count or compaction.
    posted = bob.post(
        f"/api/v1/sessions/{session.pk}/messages/",
        {"role": "user", "content": "hi", "seq": 50, "state": "archived", "tokens": 1, "compaction": 1},
    )
    assert posted.status_code == 201
    row = Message.objects.get(session=session)
    assert (row.seq, row.state, row.compaction_id) == (1, "active", None) and row.tokens > 1


def test_lists_expose_no_more_than_they_should(api_as, team, session_of):
    """API3 (excessive data exposure): lists carry no message content, no keys, nothing of others."""
    session = session_of(name="mine", system_prompt="TOP SECRET PROMPT")
    from tests.sessions_app.compaction_helpers import append

    append(session, [{"role": "user", "content": "a private message body"}])
    listing = api_as(team.carol).get("/api/v1/sessions/").content.decode()
    assert "a private message body" not in listing
    assert "ctx_" not in listing and "key_hash" not in listing
    projects = api_as(team.carol).get("/api/v1/projects/").json()
    names = {p["name"] for p in projects["results"]} if isinstance(projects, dict) else {p["name"] for p in projects}
    assert names == {"Alpha"}


def test_function_level_authorization_for_admin_and_settings(client, team):
    """API5: Django admin is staff-only; project settings are project-admin-only."""
    client.force_login(team.alice.user)  # a project admin, not staff
    assert client.get("/admin/").status_code == 302
    assert client.get(f"/projects/{team.project.pk}/settings/").status_code == 200
    client.force_login(team.bob.user)
    assert client.get(f"/projects/{team.project.pk}/settings/").status_code == 403


def test_no_key_or_message_content_in_logs_at_info(api_as, team, session_of, caplog):
    """Security logging: what is logged at INFO carries neither credentials nor what agents said."""
    session = session_of()
    caplog.set_level(logging.INFO)
    secret = "the-launch-code-is-0000"
    bob = api_as(team.bob)
    bob.post(f"/api/v1/sessions/{session.pk}/messages/", {"role": "user", "content": secret})
    bob.post(f"/api/v1/sessions/{session.pk}/compactions/", {"level": "compact"})
    api_as(type(team.bob)(user=team.bob.user, key=team.bob.key + "x")).get("/api/v1/projects/")
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert secret not in logged and team.bob.key not in logged and team.bob.key[:20] not in logged
