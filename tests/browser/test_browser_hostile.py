"""Hostile names and models on the new pages in a real Chromium at a phone's width: the session page
(requests, tools, sub-agents), the dashboard's spend panel and the ops page show them as text (no
markup runs), answer without an error, and never scroll the page sideways."""

from __future__ import annotations

import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from compaction.messages import normalize_message
from sessions_app.models import AgentSession, ApiKey
from sessions_app.models.sessions import SIDECHAIN_OF
from sessions_app.services import agent_sessions, ingest, keys, spend_rollup
from tests.browser.helpers import ARTIFACTS, PHONE, horizontal_overflow

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SCRIPT = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>'
RTL = "\u202eالنموذج العربي الطويل جدا\u202c"
LONG = "claude-" + "x" * 193  # a model as long as the column holds, with nowhere to break
NAMES = [f"{SCRIPT} {RTL}", LONG, '=HYPERLINK("http://evil")']


def _hostile_session(user, project) -> AgentSession:
    session = agent_sessions.session_create(user=user, project=project, name=f"{SCRIPT}{RTL}", model=LONG[:100])
    blocks = [{"type": "tool_use", "id": "toolu_1", "name": f"{SCRIPT[:40]}{'w' * 60}", "input": {"q": RTL}}]
    ingest.message_append(
        session=session,
        messages=[
            normalize_message({"role": "user", "content": "go"}),
            normalize_message({"role": "assistant", "content": blocks}),
            normalize_message(
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": SCRIPT}]}
            ),
        ],
    )
    agent_sessions.session_create(
        user=user, project=project, name=f"sub {SCRIPT}{RTL}", model=LONG[:100], metadata={SIDECHAIN_OF: session.pk}
    )
    key, _ = keys.apikey_create(user=user, name=f"{SCRIPT}{RTL}"[:100])
    api_key = ApiKey.objects.get(prefix=key.prefix)
    for n, model in enumerate(NAMES * 2):
        spend_rollup.request_store(
            key=uuid.uuid4(),
            session=session,
            project=project,
            api_key=api_key,
            user=user,
            created_at=timezone.now() - timedelta(minutes=n),
            model=model,
            input_tokens=10**9,
            cache_creation_input_tokens=n,
            cache_read_input_tokens=10**9,
            output_tokens=10**9,
            cost_usd=Decimal("99999.9999999999"),
            service_tier=RTL[:50],
            status=200,
        )
    return session


def test_hostile_names_render_as_text_and_fit_a_phone(open_as, crew, live_server):
    from django.contrib.auth import get_user_model

    session = _hostile_session(crew.alice.user, crew.project)
    staff = get_user_model().objects.create_user(username="ops", password="ops-pass-123", is_staff=True)
    ARTIFACTS.mkdir(exist_ok=True)
    page = open_as(crew.alice.user, viewport=PHONE)
    for path, shot in (
        (f"/sessions/{session.pk}/", "hostile-session-390"),
        (f"/projects/{crew.project.pk}/", "hostile-dashboard-390"),
    ):
        response = page.goto(path)
        assert response is not None and response.status == 200, path
        assert page.evaluate("window.__pwned") is None, path
        assert page.locator("script", has_text="window.__pwned").count() == 0
        assert horizontal_overflow(page) <= 1, path
        page.screenshot(path=str(ARTIFACTS / f"{shot}.png"), full_page=False)
    page.goto(f"/sessions/{session.pk}/")
    assert page.locator("#requests td.model").first.inner_text() in NAMES or LONG in page.content()
    assert page.get_by_text(SCRIPT[:20], exact=False).count() >= 1  # the markup shows as text
    assert page.locator("#sub-agents").count() == 1
    tools = page.locator("#tools")
    assert tools.count() == 1 and "w" * 60 in tools.inner_text()

    page.goto(f"/projects/{crew.project.pk}/")  # the dashboard's spend panel, by key: the key's name as text
    assert page.locator(".spend-table").count() >= 1
    assert SCRIPT[:20] in page.locator(".spend-table").all_inner_texts().__str__()

    ops = open_as(staff, viewport=PHONE)
    response = ops.goto("/ops/")
    assert response is not None and response.status == 200
    assert horizontal_overflow(ops) <= 1
