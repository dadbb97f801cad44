"""The project dashboard in a real Chromium, on the demo project: it shows what its API answers, a
member's Retry takes a paused session off the list, and it fits a phone."""

from __future__ import annotations

import os
import shutil

import pytest

from sessions_app.selectors.dashboard import dashboard_payload, project_dashboard
from tests.browser.helpers import ARTIFACTS, PHONE, demo_signed_in, horizontal_overflow
from tests.conftest import ROOT

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

DOCS_SCREENSHOT = ROOT / "docs" / "img" / "project-dashboard.png"


def demo_page(open_as, live_server, viewport=None):
    page, demo = demo_signed_in(open_as, live_server, viewport)
    page.goto(f"/projects/{demo.project.pk}/")
    return page, demo


@pytest.mark.django_db(transaction=True, reset_sequences=True)  # small ids in the picture
def test_dashboard_shows_its_numbers_and_retry_clears_a_paused_session(open_as, live_server):
    page, demo = demo_page(open_as, live_server)
    expected = dashboard_payload(project_dashboard(project=demo.project))
    counts = page.locator("#dashboard .level-counts li").evaluate_all(
        "lis => Object.fromEntries(lis.map(li => [li.dataset.level, Number(li.querySelector('.count').textContent)]))"
    )
    assert counts == expected["levels"]
    closest = page.locator("#dashboard table.closest tr").evaluate_all(
        "rows => rows.map(r => Number(r.dataset.session))"
    )
    assert closest == [c["session"] for c in expected["closest"]]
    bars = page.locator("#dashboard table.closest [role=progressbar]").evaluate_all(
        "bars => bars.map(b => [Number(b.getAttribute('aria-valuenow')), b.dataset.level])"
    )
    assert bars == [[c["usage_percent"], c["level"]] for c in expected["closest"]]
    days = page.locator("#dashboard g.day").evaluate_all(
        "gs => gs.map(g => [g.dataset.day, Number(g.dataset.ingested), Number(g.dataset.saved)])"
    )
    assert days == [[d["day"], d["ingested"], d["saved"]] for d in expected["days"]]
    assert page.locator("#dashboard .cost strong").get_attribute("data-dollars") == expected["cost"]["dollars"]
    (paused,) = [t for t in expected["trouble"] if t["paused"]]
    row = page.locator(f"#dashboard .trouble tr[data-session='{paused['session']}']")
    assert "auto-compaction paused" in row.inner_text()
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / "project-dashboard.png"
    page.locator("#dashboard").screenshot(path=str(path))
    assert path.stat().st_size < 250_000, path.stat().st_size
    if os.environ.get("CTX_UPDATE_SCREENSHOTS") == "1":
        shutil.copyfile(path, DOCS_SCREENSHOT)

    row.get_by_role("button", name="Retry").click()
    page.wait_for_url(f"{live_server.url}/projects/{demo.project.pk}/#dashboard")
    assert "summarize compaction" in page.locator(".flash").inner_text()
    assert page.locator(f"#dashboard .trouble tr[data-session='{paused['session']}']").count() == 0


def test_dashboard_fits_a_phone(open_as, live_server):
    page, _ = demo_page(open_as, live_server, viewport=PHONE)
    assert page.locator("#dashboard .daily-chart svg").is_visible()
    assert horizontal_overflow(page) <= 1
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("#dashboard").screenshot(path=str(ARTIFACTS / "project-dashboard-390.png"))
