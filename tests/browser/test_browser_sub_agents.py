"""Sub-agents under their session, how precisely STATUS counted, and the ops page's clear button, in a
real Chromium at a phone's width: the pages show the numbers the API answers, and nothing scrolls the
page sideways."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.template.defaultfilters import floatformat

from sessions_app.models import SIDECHAIN_OF
from sessions_app.selectors.spend import session_spend
from sessions_app.services import agent_sessions, spend_rollup
from tests.browser.helpers import ARTIFACTS, PHONE, demo_signed_in, horizontal_overflow

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _request(session, cost: str) -> None:
    spend_rollup.request_store(
        key=uuid.uuid4(),
        session=session,
        project=session.project,
        created_at=session.created_at,
        model=session.model,
        input_tokens=1_000,
        output_tokens=100,
        cost_usd=Decimal(cost),
        status=200,
    )


def test_a_sessions_sub_agents_and_their_spend_fit_a_phone(open_as, live_server):
    page, demo = demo_signed_in(open_as, live_server, viewport=PHONE)
    main = demo.sessions[0]
    user = get_user_model().objects.get(username=demo.username)
    side = agent_sessions.session_create(
        user=user,
        project=demo.project,
        name=f"{main.name} · sub-agent 1 with a name long enough to wrap on a phone",
        metadata={SIDECHAIN_OF: main.pk},
    )
    _request(main, "0.125")
    _request(side, "2.5")
    page.goto(f"/projects/{demo.project.pk}/")
    link = page.locator(f"a[href='/sessions/{main.pk}/#sub-agents']")
    assert link.inner_text() == "1 sub-agent"
    assert horizontal_overflow(page) <= 1
    link.click()
    page.wait_for_url(f"{live_server.url}/sessions/{main.pk}/#sub-agents")
    panel = page.locator("#sub-agents")
    assert panel.is_visible() and panel.locator(f"a[href='/sessions/{side.pk}/']").is_visible()
    together = session_spend(main, with_sub_agents=True)
    shown = panel.locator("[data-spend='with-sub-agents']").inner_text()
    assert shown == f"${floatformat(together.cost_usd, 4)}"
    api = page.request.get(f"/api/v1/sessions/{main.pk}/spend/?sub_agents=true").json()
    assert Decimal(api["cost_usd"]) == together.cost_usd  # the page shows it to the tenth of a cent
    status = page.request.get(f"/api/v1/sessions/{main.pk}/status/").json()
    source = page.locator(".token-source")
    assert source.get_attribute("data-expected-error") == str(status["expected_error"])
    assert page.locator(".counted-at time").get_attribute("datetime") == status["counted_at"]
    assert horizontal_overflow(page) <= 1
    ARTIFACTS.mkdir(exist_ok=True)
    panel.screenshot(path=str(ARTIFACTS / "session-sub-agents-390.png"))
    page.goto(f"/sessions/{side.pk}/")
    assert page.locator(".sub-agent-of a").get_attribute("href") == f"/sessions/{main.pk}/"


def test_staff_clear_the_exact_count_cache_from_the_ops_page(open_as, live_server, settings):
    page, demo = demo_signed_in(open_as, live_server, viewport=PHONE)
    get_user_model().objects.filter(username=demo.username).update(is_staff=True)
    page.goto("/ops/")
    page.get_by_role("button", name="Clear the cache").click()
    page.wait_for_url(f"{live_server.url}/ops/")
    assert "Cleared the exact-count cache" in page.locator(".flash").inner_text()
    assert page.locator("[data-stat='hits']").inner_text() == "0"
    assert horizontal_overflow(page) <= 1
