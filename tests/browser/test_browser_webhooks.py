"""The webhooks page in a real Chromium: a project admin adds a webhook, sends a test that a local
receiver answers, and reads the attempt's status in the log; it fits a phone."""

from __future__ import annotations

import hmac

import pytest

from sessions_app.models import Webhook
from tests.browser.helpers import ARTIFACTS, PHONE, horizontal_overflow
from tests.sessions_app.webhook_receiver import receiver

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.mark.parametrize("viewport", [None, PHONE], ids=["desktop", "phone"])
def test_an_admin_adds_a_webhook_and_sends_a_test(open_as, live_server, crew, viewport, settings):
    page = open_as(crew.alice.user, viewport=viewport) if viewport else open_as(crew.alice.user)
    page.goto(f"/projects/{crew.project.pk}/settings/")
    page.get_by_role("link", name="Manage webhooks").click()
    # The form validates: an address a webhook may not call is refused, with the reason, nothing saved.
    settings.CTX_WEBHOOK_ALLOW_PRIVATE = False
    page.fill("#add input[name=url]", "http://169.254.169.254/latest/meta-data")
    page.get_by_role("button", name="Add webhook").click()
    assert "private or reserved address" in page.locator("#add .field-error").inner_text()
    assert not Webhook.objects.exists()
    page.fill("#add input[name=url]", "https://example.com/hook")
    for box in page.locator("#add input[name=events]").all():
        box.uncheck()
    page.get_by_role("button", name="Add webhook").click()
    assert page.locator("#add fieldset .field-error").is_visible()
    assert not Webhook.objects.exists()
    settings.CTX_WEBHOOK_ALLOW_PRIVATE = True
    for box in page.locator("#add input[name=events]").all():
        box.check()
    with receiver([503, 200]) as rx:
        page.fill("#add input[name=name]", "Team chat")
        page.fill("#add input[name=url]", rx.url)
        page.locator("#add input[name=events][value='session.level_changed']").uncheck()
        page.get_by_role("button", name="Add webhook").click()
        hook = Webhook.objects.get()
        assert hook.events == [
            "compaction.succeeded",
            "compaction.failed",
            "handoff.written",
            "session.paused",
            "budget.warning",
            "budget.exceeded",
        ]
        card = page.locator(f"#webhook-{hook.pk}")
        assert card.locator("code.secret").inner_text() == hook.secret
        card.get_by_role("button", name="Send test").click()
        (request,) = rx.wait_for(1)
        # What arrived is signed with the secret the page shows.
        secret = card.locator("code.secret").inner_text()
        mac = hmac.new(secret.encode(), request.headers["X-Ctxweb-Timestamp"].encode() + b"." + request.body, "sha256")
        assert request.headers["X-Ctxweb-Signature"] == "sha256=" + mac.hexdigest()
        assert request.json["event"] == "test"
        assert "Test" in page.locator(".flash").inner_text()
        row = page.locator(f"#webhook-{hook.pk} table.deliveries tbody tr").first
        assert row.get_attribute("data-status") == "pending" and "503" in row.inner_text()
    if viewport:
        assert horizontal_overflow(page) <= 1
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"webhooks-{'390' if viewport else 'desktop'}.png"), full_page=True)
