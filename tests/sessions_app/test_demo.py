"""`ctx demo`: its user can open Django admin in the embedded default, and only there."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from sessions_app.services.demo import DEMO_PASSWORD, DEMO_USER, demo_load

ROOT = Path(__file__).resolve().parents[2]


def _demo_admin_setting(**env: str) -> bool:
    """``CTX_DEMO_ADMIN`` as settings.py derives it from this environment (and nothing else of ours)."""
    clean = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DEBUG", "SECRET_KEY")}
    out = subprocess.run(
        [sys.executable, "-c", "import ctxweb.settings as s; print(s.CTX_DEMO_ADMIN)"],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip() == "True"


def test_the_embedded_default_makes_the_demo_user_an_admin_and_a_deployment_does_not():
    assert _demo_admin_setting() is True  # `make run`: no DATABASE_URL, the development secret key
    assert _demo_admin_setting(DEBUG="1", SECRET_KEY="s" * 50) is True
    assert _demo_admin_setting(SECRET_KEY="s" * 50) is False  # a deployment on SQLite
    assert _demo_admin_setting(DATABASE_URL="postgres://u@h/db", DEBUG="1") is False


@pytest.mark.django_db
def test_the_demo_user_signs_in_to_admin_in_the_embedded_default(client, settings):
    settings.CTX_DEMO_ADMIN = True
    out = io.StringIO()
    call_command("ctx", "demo", stdout=out)
    assert "Django admin (/admin/)" in out.getvalue()
    signed_in = client.post("/admin/login/", {"username": DEMO_USER, "password": DEMO_PASSWORD, "next": "/admin/"})
    assert signed_in.status_code == 302 and signed_in["Location"] == "/admin/"
    page = client.get("/admin/")
    assert page.status_code == 200
    assert "Webhook deliveries" in page.content.decode()


@pytest.mark.django_db
def test_the_demo_user_stays_a_plain_user_in_a_deployment(client, settings):
    settings.CTX_DEMO_ADMIN = True
    demo_load()
    settings.CTX_DEMO_ADMIN = False
    assert demo_load().admin is False  # loaded again (already there): its rights follow the mode
    user = get_user_model().objects.get(username=DEMO_USER)
    assert not user.is_staff and not user.is_superuser
    refused = client.post("/admin/login/", {"username": DEMO_USER, "password": DEMO_PASSWORD, "next": "/admin/"})
    assert refused.status_code == 200  # the form again: admin is for staff
    assert "staff account" in refused.content.decode()


@pytest.mark.django_db
def test_the_header_shows_staff_the_way_to_admin(client, settings, team):
    settings.CTX_DEMO_ADMIN = True
    demo_load()
    client.force_login(get_user_model().objects.get(username=DEMO_USER))
    assert '<a href="/admin/">Admin</a>' in client.get("/projects/").content.decode()
    client.force_login(team.alice.user)
    assert 'href="/admin/"' not in client.get("/projects/").content.decode()


@pytest.mark.django_db
def test_the_demo_has_spend_to_show_and_its_tables_add_up():
    """Each reply of each demo session is a priced request: the spend tables (the rollup) add up to
    the rows, and a second load adds nothing."""
    from decimal import Decimal

    from sessions_app.models import ProviderRequest
    from sessions_app.selectors.spend import project_spend

    result = demo_load()
    rows = ProviderRequest.objects.filter(project=result.project)
    replies = sum(s.messages.filter(role="assistant").count() for s in result.sessions)
    assert rows.count() == replies > 0
    assert all(r.cost_usd is not None and r.cost_usd > 0 for r in rows)
    spent = project_spend(project=result.project, days=14, by="day")
    assert spent.total.requests == replies
    assert spent.total.cost_usd == sum((r.cost_usd for r in rows), Decimal(0))
    demo_load()
    assert ProviderRequest.objects.filter(project=result.project).count() == replies
