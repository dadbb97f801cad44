"""The webhooks page in a real Chromium: a project admin adds a webhook, sends a test that a local
receiver answers, and reads the attempt's status in the log; it fits a phone."""

from __future__ import annotations

import pytest

from sessions_app.models import Webhook
from tests.browser.helpers import ARTIFACTS, PHONE, horizontal_overflow
from tests.sessions_app.webhook_receiver import receiver

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("viewport", [None, PHONE], ids=["desktop", "phone"])
def test_an_admin_adds_a_webhook_and_sends_a_test(open_as, live_server, crew, viewport):
    page = open_as(crew.alice.user, viewport=viewport) if viewport else open_as(crew.alice.user)
    page.goto(f"/projects/{crew.project.pk}/settings/")
    page.get_by_role("link", name="Manage webhooks").click()
    with receiver([503, 200]) as rx:
        page.fill("#add input[name=name]", "Team chat")
        page.fill("#add input[name=url]", rx.url)
        page.locator("#add input[name=events][value='session.level_changed']").uncheck()
        page.get_by_role("button", name="Add webhook").click()
        hook = Webhook.objects.get()
        assert hook.events == ["compaction.succeeded", "compaction.failed", "handoff.written", "session.paused"]
        card = page.locator(f"#webhook-{hook.pk}")
        assert card.locator("code.secret").inner_text() == hook.secret
        card.get_by_role("button", name="Send test").click()
        rx.wait_for(1)
        assert "Test" in page.locator(".flash").inner_text()
        row = page.locator(f"#webhook-{hook.pk} table.deliveries tbody tr").first
        assert row.get_attribute("data-status") == "pending" and "503" in row.inner_text()
    if viewport:
        assert horizontal_overflow(page) <= 1
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"webhooks-{'390' if viewport else 'desktop'}.png"), full_page=True)
