"""The session page follows a real worker without being reloaded: a summarize run on Redis and a
Celery worker whose (fake) LLM call takes a few seconds goes queued/running → succeeded on screen,
the bar's numbers change, and a message an agent posts through the REST API shows up."""

from __future__ import annotations

import json
import re
import urllib.request

import pytest

from sessions_app.models import Compaction
from tests.browser.helpers import busy_session, figures, legend, live_bar, shot, status_of
from tests.sessions_app.compaction_helpers import checkpoint_reply

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True), pytest.mark.slow]

LLM_DELAY = 3.0  # seconds the fake Anthropic API takes to answer the summarize call


@pytest.fixture
def worker(celery_worker, settings):
    fake = celery_worker["fake"]
    fake.reset()
    fake.set_reply_function(checkpoint_reply)
    fake.set_delay(LLM_DELAY, endpoint="messages")
    # The worker summarizes through the fake API (its own environment has the key). The web side,
    # this process, has none: it queues no exact counts, so the figures on the page change only
    # when this test changes them.
    settings.ANTHROPIC_API_KEY = ""
    settings.CELERY_TASK_ALWAYS_EAGER = False
    yield celery_worker
    fake.set_delay(0, endpoint="messages")
    fake.set_reply_function(None)
    fake.reset()


def not_reloaded(page) -> bool:
    return page.evaluate("window.__ctxNotReloaded === true")


def test_the_session_page_follows_a_worker_and_the_api_without_reloading(worker, open_as, live_server, crew):
    session = busy_session(crew.alice.user, crew.project)
    page = open_as(crew.alice.user)
    page.goto(f"/sessions/{session.pk}/")
    page.wait_for_function("window.htmx !== undefined")
    before = status_of(session)
    assert live_bar(page) == (before["usage_percent"], before["level"])

    page.select_option("#id_level", "summarize")
    page.get_by_role("button", name="Run compaction").click()
    page.wait_for_url(re.compile(rf"/sessions/{session.pk}/#compactions$"))
    record = Compaction.objects.get(session=session)
    # From here on the page is only ever updated in place: the marker would not survive a load.
    page.evaluate("window.__ctxNotReloaded = true")

    row = page.locator(f"#compaction-{record.pk}")
    assert row.get_attribute("data-status") in ("queued", "running")
    assert page.locator("#compactions .badge.running").inner_text() == "in progress…"
    assert live_bar(page) == (before["usage_percent"], before["level"])
    # The worker claims it and waits on the LLM: the panel shows it running.
    page.wait_for_selector(f"#compaction-{record.pk}[data-status=running]", timeout=30_000)
    shot(page, "session-running")
    page.wait_for_selector(f"#compaction-{record.pk}[data-status=succeeded]", timeout=30_000)
    assert not_reloaded(page)
    record.refresh_from_db()
    assert record.status == "succeeded", record.error
    assert worker["fake"].requests_for("messages"), "the summary went through the (fake) Anthropic API"
    assert page.locator("#compactions .badge.running").count() == 0
    row = page.locator(f"#compaction-{record.pk}")
    assert f"{record.tokens_before} → {record.tokens_after} (saved {record.saved_tokens})" in row.inner_text()
    assert page.get_by_role("link", name="Revert…").count() == 1

    after = status_of(session)
    assert after["summary"] > 0 and after["used"] < before["used"]
    page.wait_for_function(
        "v => document.querySelector('#live [role=progressbar]').getAttribute('aria-valuenow') === v",
        arg=str(after["usage_percent"]),
    )
    assert live_bar(page) == (after["usage_percent"], after["level"])
    assert legend(page) == figures(after)
    # the timeline reloaded itself on the panel's "session-changed": the summarized messages say so
    page.wait_for_selector("#timeline li.msg.state-summarized")
    assert not_reloaded(page)

    # An agent posts a message through the REST API; the page shows it by itself.
    text = "Agent note: the parser fix is merged, moving on to time zones."
    request = urllib.request.Request(
        f"{live_server.url}/api/v1/sessions/{session.pk}/messages/",
        data=json.dumps({"role": "user", "content": text, "client_id": "browser-live-1"}).encode(),
        headers={"Authorization": f"Bearer {crew.alice.key}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 201
        seq = json.loads(response.read())["messages"][0]["seq"]
    message = page.locator(f"#timeline #msg-{seq}")
    message.wait_for(timeout=10_000)
    assert text in message.inner_text()
    assert not_reloaded(page)
    latest = status_of(session)
    page.wait_for_function(
        "v => document.querySelector('#live .legend li:has(.seg-messages) strong').textContent === v",
        arg=str(latest["messages"]),
    )
    assert latest["messages"] > after["messages"]
    shot(page, "session-live", full_page=True)
