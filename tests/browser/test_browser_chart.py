"""The session chart in a real Chromium: what it draws is what the history API answers, its table
opens from the disclosure, and it fits a phone (the chart scrolls inside its card, the page doesn't)."""

from __future__ import annotations

import os
import shutil

import pytest

from sessions_app.selectors.history import history_payload, session_history
from tests.browser.helpers import ARTIFACTS, PHONE, demo_signed_in, horizontal_overflow
from tests.conftest import ROOT

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

DOCS_SCREENSHOT = ROOT / "docs" / "img" / "session-chart.png"


def signed_in_demo(open_as, live_server, viewport=None):
    page, demo = demo_signed_in(open_as, live_server, viewport)
    nightly = next(s for s in demo.sessions if s.name.startswith("Nightly"))
    return page, nightly


@pytest.mark.django_db(transaction=True, reset_sequences=True)  # small ids in the picture
def test_chart_draws_what_the_history_api_answers(open_as, live_server):
    page, session = signed_in_demo(open_as, live_server)
    page.goto(f"/sessions/{session.pk}/")
    expected = history_payload(session_history(session))
    assert len([e for e in expected["events"] if e["kind"] == "compaction"]) >= 2  # the demo compacts on its own
    chart = page.locator("#history svg")
    assert chart.is_visible()
    assert chart.get_attribute("role") == "img"
    assert page.locator("#history-title").text_content().startswith(f"Context used over {len(expected['points'])}")
    assert int(chart.get_attribute("data-last-used")) == expected["now"]
    drawn = page.locator("#history g.chart-event").evaluate_all(
        "els => els.map(e => [e.dataset.kind, e.dataset.level, Number(e.dataset.afterSeq)])"
    )
    assert drawn == [[e["kind"], e["level"], e["after_seq"]] for e in expected["events"]]
    # Every drop is drawn downward, by its saving, and labelled with its level.
    for marker in page.locator("#history g.chart-event[data-kind=compaction]").all():
        line = marker.locator("line")
        assert float(line.get_attribute("y2")) > float(line.get_attribute("y1"))
        assert marker.locator("text").text_content() == marker.get_attribute("data-level")
    table = page.locator("#history details.history-table table")
    assert not table.is_visible()
    page.locator("#history details.history-table summary").click()
    assert table.is_visible()
    rows = table.locator("tbody tr").evaluate_all(
        "rows => rows.map(r => [Number(r.dataset.seq), Number(r.dataset.used)])"
    )
    assert rows == [[p["seq"], p["used"]] for p in expected["points"]]
    page.locator("#history details.history-table summary").click()
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / "session-chart.png"
    page.locator("#history").screenshot(path=str(path))
    assert path.stat().st_size < 200_000, path.stat().st_size
    if os.environ.get("CTX_UPDATE_SCREENSHOTS") == "1":
        shutil.copyfile(path, DOCS_SCREENSHOT)


def test_chart_fits_a_phone(open_as, live_server):
    page, session = signed_in_demo(open_as, live_server, viewport=PHONE)
    page.goto(f"/sessions/{session.pk}/")
    assert page.locator("#history svg").is_visible()
    assert horizontal_overflow(page) <= 1
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("#history").screenshot(path=str(ARTIFACTS / "session-chart-390.png"))
