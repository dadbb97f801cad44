"""The session page's requests in a real Chromium at a phone's width: the figures it shows (the total
cost, each row's cost and tokens) are what ``GET /api/v1/sessions/{id}/requests/`` answers, its pager
swaps in the next rows, and twelve columns scroll inside their box, never the page."""

from __future__ import annotations

from decimal import Decimal

import pytest

from sessions_app.web.request_panel import REQUESTS_PER_PAGE
from sessions_app.web.spend_panel import usd
from tests.browser.helpers import ARTIFACTS, PHONE, chat_session, horizontal_overflow
from tests.request_rows import TOKENS, requests_in

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def shown_rows(page) -> list[dict]:
    return page.locator("#requests tr.request").evaluate_all(
        """rows => rows.map(r => ({
            id: Number(r.dataset.request),
            cost: r.dataset.cost,
            cost_text: r.querySelector("td.cost").innerText.trim(),
            tokens: [...r.querySelectorAll("td")].slice(1, 5).map(td => td.innerText.trim()),
        }))"""
    )


def as_api_says(rows: list[dict]) -> list[dict]:
    return [
        {
            "id": r["id"],
            "cost": r["cost_usd"] or "",
            "cost_text": usd(None if r["cost_usd"] is None else Decimal(r["cost_usd"])),
            "tokens": [f"{r[name]:,}" for name in TOKENS],
        }
        for r in rows
    ]


def test_the_requests_show_the_apis_numbers_and_fit_a_phone(open_as, crew):
    session = chat_session(crew.alice.user, crew.project)
    requests_in(session, REQUESTS_PER_PAGE + 6)
    page = open_as(crew.carol.user, viewport=PHONE)
    page.goto(f"/sessions/{session.pk}/")
    api = f"/api/v1/sessions/{session.pk}/requests/"
    every = page.request.get(f"{api}?page_size=1000").json()["results"]  # as the signed-in viewer
    total = sum((Decimal(r["cost_usd"]) for r in every if r["cost_usd"] is not None), Decimal(0))
    assert page.locator("#requests .total-cost").inner_text() == usd(total)
    assert page.locator("#requests .request-summary").get_attribute("data-cost") == f"{total:.10f}"
    first = page.request.get(f"{api}?page_size={REQUESTS_PER_PAGE}").json()["results"]
    assert shown_rows(page) == as_api_says(first)

    assert horizontal_overflow(page) <= 1
    box = page.locator("#requests .table-scroll")
    assert box.evaluate("b => b.scrollWidth > b.clientWidth")  # the table scrolls in its own box
    charts = page.locator("#requests .chart-scroll")  # so do the charts, their labels kept readable
    assert charts.evaluate("b => b.getBoundingClientRect().right") <= PHONE["width"]
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("#requests").screenshot(path=str(ARTIFACTS / "session-requests-390.png"))

    page.get_by_role("link", name="older →").click()  # htmx: the rows swap, the page stays
    page.wait_for_selector("#request-rows >> text=page 2 of 2")
    second = page.request.get(f"{api}?page_size={REQUESTS_PER_PAGE}&page=2").json()["results"]
    assert shown_rows(page) == as_api_says(second) and len(second) == 6
    assert page.url.endswith(f"/sessions/{session.pk}/")
    assert horizontal_overflow(page) <= 1
