"""Tokens by tool on the session page and what compaction saved on the dashboard, in a real Chromium
at a phone's width: the page shows what the API answers, and nothing scrolls the page sideways."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from sessions_app.models import Compaction
from sessions_app.services import spend_rollup
from tests.browser.helpers import ARTIFACTS, PHONE, demo_signed_in, horizontal_overflow

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_the_tools_table_and_the_saving_show_the_apis_numbers_at_390px(open_as, live_server):
    page, demo = demo_signed_in(open_as, live_server, viewport=PHONE)
    done = Compaction.objects.filter(session__project=demo.project, status="succeeded").first()
    assert done is not None and done.finished_at is not None, "the demo's auto-compacted session"
    session = done.session
    spend_rollup.request_store(
        key=uuid.uuid4(),
        session=session,
        project=demo.project,
        user=session.owner,
        created_at=done.finished_at + timedelta(seconds=1),
        model=session.model,
        input_tokens=1000,
        output_tokens=100,
        status=200,
    )
    api = page.request

    page.goto(f"/sessions/{session.pk}/")
    body = api.get(f"/api/v1/sessions/{session.pk}/tools/").json()
    shown = page.locator("#tools tbody tr").evaluate_all(
        "rows => rows.map(r => [r.dataset.tool, Number(r.dataset.calls), Number(r.dataset.tokens),"
        " Number(r.dataset.takenBack)])"
    )
    assert shown and shown == [[t["tool"], t["calls"], t["tokens"], t["taken_back"]] for t in body["tools"]]
    assert body["total"]["taken_back"] > 0  # the demo's compactions took tool output back
    assert horizontal_overflow(page) <= 1
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("#tools").screenshot(path=str(ARTIFACTS / "session-tools-390.png"))

    page.goto(f"/projects/{demo.project.pk}/")
    spend = api.get(f"/api/v1/projects/{demo.project.pk}/spend/?days=14").json()["total"]
    saved = page.locator("#spend p.saved")
    assert saved.get_attribute("data-saved") == spend["saved_usd"]
    assert spend["saved_tokens"] > 0 and "Compaction saved" in saved.inner_text()
    assert horizontal_overflow(page) <= 1
