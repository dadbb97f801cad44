"""The session page's requests: the summary holds the sums of the session's rows (computed here from
the rows), the table pages newest first (htmx or plain links), the chart draws the newest, a session
without requests says so, and outsiders get 404."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.urls import reverse

from sessions_app.models import ProviderRequest
from sessions_app.web.request_chart import CHART_REQUESTS, context_of, request_chart
from sessions_app.web.request_panel import REQUESTS_PER_PAGE
from sessions_app.web.spend_panel import usd
from tests.request_rows import TOKENS, requests_in, sums

pytestmark = pytest.mark.django_db

ROW = re.compile(
    r'<tr class="request" data-request="(\d+)" data-cost="([^"]*)" data-input="(\d+)" data-cache-write="(\d+)"'
    r' data-cache-read="(\d+)" data-output="(\d+)">(.*?)</tr>',
    re.S,
)


def page_of(client, persona, session, query: str = "") -> str:
    client.force_login(persona.user)
    response = client.get(reverse("web:session", args=[session.pk]) + query)
    assert response.status_code == 200
    return response.content.decode()


def shown_rows(html: str) -> list[tuple]:
    return [
        (int(pk), cost, *(int(n) for n in tokens), cells)
        for pk, cost, *tokens, cells in ((m[0], m[1], *m[2:6], m[6]) for m in ROW.findall(html))
    ]


def as_shown(row: ProviderRequest) -> tuple:
    cost = "" if row.cost_usd is None else f"{row.cost_usd:.10f}"
    return (row.pk, cost, *(getattr(row, name) for name in TOKENS))


def newest_first(rows: list[ProviderRequest]) -> list[ProviderRequest]:
    return sorted(rows, key=lambda r: (r.created_at, r.pk), reverse=True)


def test_the_page_shows_the_newest_rows_and_the_sessions_totals(client, team, session_of):
    session = session_of(model="claude-sonnet-4-5")
    rows = requests_in(session, REQUESTS_PER_PAGE + 5)
    html = page_of(client, team.carol, session)  # a viewer reads it
    want = sums(rows)
    summary = re.search(r'<p class="request-summary"([^>]*)>(.*?)</p>', html, re.S)
    assert summary
    attrs = dict(re.findall(r'data-([\w-]+)="([^"]*)"', summary.group(1)))
    assert int(attrs["requests"]) == want["requests"] == REQUESTS_PER_PAGE + 5
    assert Decimal(attrs["cost"]) == want["cost_usd"] and int(attrs["unpriced"]) == want["unpriced"] > 0
    kinds = {"input": "input_tokens", "cache-write": "cache_creation_input_tokens"}
    kinds |= {"cache-read": "cache_read_input_tokens", "output": "output_tokens"}
    assert {k: int(attrs[k]) for k in kinds} == {k: want[name] for k, name in kinds.items()}
    assert f'<strong class="total-cost">{usd(want["cost_usd"])}</strong>' in summary.group(2)
    assert f"{want['cache_read_input_tokens']:,}</span> cache read" in summary.group(2)

    shown = shown_rows(html)
    assert [s[:6] for s in shown] == [as_shown(r) for r in newest_first(rows)[:REQUESTS_PER_PAGE]]
    cells = {pk: text for pk, *_, text in shown}
    unpriced = next(r for r in rows if r.cost_usd is None)
    assert '<td class="cost">—</td>' in cells[unpriced.pk]
    priced = rows[-1]
    assert f'<td class="cost">{usd(priced.cost_usd)}</td>' in cells[priced.pk]
    ratio = priced.cache_read_input_tokens / context_of(priced)
    assert f"<td>{ratio:.0%}</td>" in cells[priced.pk]
    transcript = next(r for r in newest_first(rows) if r.source == "transcript")
    assert ">transcript</span>" in cells[transcript.pk] and "<td>—</td><td>—</td>" in cells[transcript.pk]
    assert "?format=csv" in html and reverse("api:session-requests", args=[session.pk]) in html


def test_a_compacted_request_links_its_compaction(client, team, session_of):
    session = session_of(model="claude-sonnet-4-5")
    rows = requests_in(session, 3)
    html = page_of(client, team.alice, session)
    cells = {pk: text for pk, *_, text in shown_rows(html)}
    pk = rows[1].compacted_id
    assert re.search(rf'<a href="/sessions/{session.pk}/#compaction-{pk}"[^>]*>compaction {pk}</a>', cells[rows[1].pk])
    assert "#compaction-" not in cells[rows[0].pk]


def test_the_table_pages_through_every_request(client, team, session_of):
    session = session_of(model="claude-sonnet-4-5")
    rows = newest_first(requests_in(session, REQUESTS_PER_PAGE * 2 + 3))
    client.force_login(team.bob.user)
    path = reverse("web:session-requests", args=[session.pk])
    seen = []
    for number in (1, 2, 3):
        response = client.get(f"{path}?page={number}", HTTP_HX_REQUEST="true")
        assert response.status_code == 200
        part = response.content.decode()
        assert part.startswith('<div id="request-rows">') and f"page {number} of 3" in part
        seen += [s[:6] for s in shown_rows(part)]
    assert seen == [as_shown(r) for r in rows]  # each once, newest first
    assert f'hx-get="{path}?page=2"' in page_of(client, team.bob, session)  # the pager asks for the next
    plain = client.get(f"{path}?page=3")  # without htmx: the session page at that page
    assert plain.status_code == 302 and plain["Location"].endswith(f"/sessions/{session.pk}/?requests=3#requests")
    older = shown_rows(page_of(client, team.bob, session, "?requests=3"))
    assert [s[:6] for s in older] == [as_shown(r) for r in rows[-3:]]
    assert shown_rows(page_of(client, team.bob, session, "?requests=x"))[0][0] == rows[0].pk  # a bad page: the first


def test_a_session_without_requests_says_so(client, team, session_of):
    session = session_of(model="claude-sonnet-4-5")
    html = page_of(client, team.alice, session)
    assert "No provider request recorded for this session yet" in html
    assert 'class="requests"' not in html and "format=csv" not in html and "request-chart" not in html


def test_outsiders_get_404(client, team, session_of):
    session = session_of(model="claude-sonnet-4-5")
    requests_in(session, 2)
    client.force_login(team.mallory.user)
    response = client.get(reverse("web:session-requests", args=[session.pk]), HTTP_HX_REQUEST="true")
    assert response.status_code == 404 and b"claude-sonnet" not in response.content


def test_the_chart_draws_the_newest_requests_in_order(client, team, session_of):
    session = session_of(model="claude-sonnet-4-5")
    rows = requests_in(session, 9)
    html = page_of(client, team.alice, session)
    assert html.count('role="img" aria-labelledby="req-') == 2
    assert re.search(r'<desc id="req-cost-desc">Cost of each of 9 requests: .* 1 without a price', html)
    bars = re.findall(r'<g class="request-bar" data-request="(\d+)" data-context="(\d+)"', html)
    assert [(int(pk), int(c)) for pk, c in bars] == [(r.pk, context_of(r)) for r in rows]  # oldest on the left
    costs = re.findall(r'<rect class="bar-cost" data-request="(\d+)"', html)
    assert [int(pk) for pk in costs] == [r.pk for r in rows if r.cost_usd is not None]


def test_the_chart_scales_its_bars_and_keeps_to_the_newest(team, session_of):
    session = session_of(model="claude-sonnet-4-5")
    rows = newest_first(requests_in(session, CHART_REQUESTS + 4))
    chart = request_chart(rows[:CHART_REQUESTS], total=len(rows))
    assert chart and (chart.shown, chart.total) == (CHART_REQUESTS, CHART_REQUESTS + 4)
    assert chart.bars[0].number == 5 and chart.bars[-1].request_id == rows[0].pk
    peak = max(chart.bars, key=lambda b: b.context)
    assert peak.context_h == max(b.context_h for b in chart.bars) > 0
    for bar in chart.bars:  # heights in proportion to the figures, the cached part within the bar
        assert bar.context_h * peak.context == pytest.approx(peak.context_h * bar.context, rel=1e-9)
        assert bar.cached_h <= bar.context_h and bar.cached_y >= bar.context_y
    dearest = max((b for b in chart.bars if b.cost is not None), key=lambda b: b.cost or 0)
    assert all(b.cost_h <= dearest.cost_h for b in chart.bars)
    assert all(b.cost_h == 0 for b in chart.bars if b.cost is None)
    assert request_chart([], total=0) is None


def test_the_dashboard_offers_the_periods_requests_as_csv(client, team):
    client.force_login(team.carol.user)
    page = client.get(reverse("web:project", args=[team.project.pk])).content.decode()
    path = reverse("api:project-requests", args=[team.project.pk])
    assert f'href="{path}?days=14&amp;format=csv" download>Every request (CSV)</a>' in page
