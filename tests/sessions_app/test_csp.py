"""Every page carries the Content-Security-Policy, and no page holds a script the policy would refuse:
no inline script or handler without the response's nonce. (tests/browser/test_browser_csp.py loads
the pages in Chromium and listens for violations.)"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model

from tests.sessions_app.compaction_helpers import append

pytestmark = pytest.mark.django_db

INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")([^>]*)>", re.I)
INLINE_HANDLER = re.compile(r"<[a-z][^>]*\son[a-z]+=", re.I)


def policy(response) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    return {part.split()[0]: part.split()[1:] for part in header.split(";") if part.strip()}


def periodic_task():
    """One beat task, for its admin page (migration 0005's are gone after a transactional test's flush)."""
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    every = IntervalSchedule.objects.get_or_create(every=1, period=IntervalSchedule.HOURS)[0]
    return PeriodicTask.objects.get_or_create(name="csp check", defaults={"task": "noop", "interval": every})[0]


def assert_runs_under_the_policy(response) -> None:
    assert response.status_code == 200
    directives = policy(response)
    assert directives["script-src"][0] == "'self'" and "'unsafe-inline'" not in directives["script-src"]
    assert "'unsafe-eval'" not in directives["script-src"] and directives["object-src"] == ["'none'"]
    body = response.content.decode()
    nonce = next((s[len("'nonce-") : -1] for s in directives["script-src"] if s.startswith("'nonce-")), None)
    for attributes in INLINE_SCRIPT.findall(body):
        assert nonce and f'nonce="{nonce}"' in attributes, attributes
    handler = INLINE_HANDLER.search(body)
    assert not handler, handler.group(0)


def test_the_pages_carry_the_policy_and_no_script_it_would_refuse(client, team, session_of):
    session = session_of(name="s")
    append(session, [{"role": "user", "content": "hello"}])
    assert_runs_under_the_policy(client.get("/accounts/login/"))
    client.force_login(team.alice.user)
    for path in (
        "/projects/",
        f"/projects/{team.project.pk}/",
        f"/projects/{team.project.pk}/settings/",
        f"/sessions/{session.pk}/",
        f"/sessions/{session.pk}/live/",
        "/keys/",
        "/api/docs/",
    ):
        assert_runs_under_the_policy(client.get(path))


def test_admin_pages_run_under_the_policy(client, team):
    root = get_user_model().objects.create_superuser("root", "root@example.invalid", "root-pass-123")
    client.force_login(root)
    task = periodic_task()
    for path in (
        "/admin/",
        "/admin/sessions_app/project/",
        f"/admin/sessions_app/project/{team.project.pk}/change/",
        f"/admin/django_celery_beat/periodictask/{task.pk}/change/",
        "/ops/",
    ):
        assert_runs_under_the_policy(client.get(path))


def test_the_api_docs_inline_script_carries_the_nonce(client):
    response = client.get("/api/docs/")
    script_src = policy(response)["script-src"]
    nonce = next(s for s in script_src if s.startswith("'nonce-"))[len("'nonce-") : -1]
    assert f'<script nonce="{nonce}">' in response.content.decode()
    assert f"'nonce-{nonce}'" in policy(response)["style-src"]
    assert client.get("/api/docs/")["Content-Security-Policy"] != response["Content-Security-Policy"]  # per response


def test_the_api_answers_carry_it_too(api_as, team):
    response = api_as(team.bob).get("/api/v1/projects/")
    assert response.status_code == 200 and "default-src 'self'" in response["Content-Security-Policy"]
