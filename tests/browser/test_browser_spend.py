"""The dashboard's spend tables in a real Chromium at a phone's width: the page shows the numbers its
API answers, and seven columns scroll inside each table's box, never the page."""

from __future__ import annotations

import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from sessions_app.api.spend_views import spend_payload
from sessions_app.models import ApiKey
from sessions_app.selectors.spend import SPEND_GROUPS, project_spend
from sessions_app.services import keys, spend_rollup
from tests.browser.helpers import ARTIFACTS, PHONE, demo_signed_in, horizontal_overflow

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def requests_in(demo) -> None:
    user = get_user_model().objects.get(username=demo.username)
    key = ApiKey.objects.filter(user=user).first() or keys.apikey_create(user=user, name="laptop")[0]
    now = timezone.now()
    plan = [
        ("claude-sonnet-4-5-20250929", 0, (123_456, 20_000, 1_234_567, 9_876), Decimal("4.5678901234")),
        ("claude-haiku-4-5", 1, (700, 0, 0, 90), Decimal("0.00115")),
        ("a-model-nobody-prices-with-a-rather-long-name", 2, (500, 0, 0, 20), None),
    ]
    for n, (model, days_ago, (inp, write, read, out), cost) in enumerate(plan):
        spend_rollup.request_store(
            key=uuid.uuid4(),
            session=demo.sessions[n % len(demo.sessions)],
            project=demo.project,
            api_key=key,
            user=user,
            created_at=now - timedelta(days=days_ago, minutes=5),
            model=model,
            input_tokens=inp,
            cache_creation_input_tokens=write,
            cache_read_input_tokens=read,
            output_tokens=out,
            cost_usd=cost,
            status=200,
        )


def test_spend_tables_show_the_apis_numbers_and_fit_a_phone(open_as, live_server):
    from sessions_app.services.demo import demo_load

    requests_in(demo_load())
    page, demo = demo_signed_in(open_as, live_server, viewport=PHONE)
    page.goto(f"/projects/{demo.project.pk}/")
    for by in SPEND_GROUPS:
        expected = spend_payload(project_spend(project=demo.project, days=14, by=by), project_id=0, days=14)
        shown = page.locator(f"#spend .spend-table[data-by='{by}'] tbody tr").evaluate_all(
            "rows => rows.map(r => [Number(r.dataset.requests.replaceAll(',', '')), r.dataset.cost])"
        )
        assert shown == [[r["requests"], r["cost_usd"] or ""] for r in expected["rows"] if r["requests"]], by
    unpriced = page.locator("#spend .spend-table[data-by='model'] tbody tr").last
    assert unpriced.locator("td.cost").inner_text() == "—"
    assert horizontal_overflow(page) <= 1
    boxes = page.locator("#spend .table-scroll").evaluate_all("bs => bs.map(b => b.scrollWidth > b.clientWidth)")
    assert any(boxes)  # the tables are wider than a phone: they scroll in their own box
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("#spend").screenshot(path=str(ARTIFACTS / "project-spend-390.png"))
