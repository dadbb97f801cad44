"""The session page's requests: what each provider request of the session used, cost and took, a page
of rows at a time, newest first; their sums (``selectors.spend.session_spend``, the figures the API's
rows add up to) and a chart of the newest. Numbers formatted for people, the raw figures beside them
in ``data-`` attributes."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Page, Paginator

from sessions_app.models import AgentSession, ProviderRequest, RequestSource
from sessions_app.selectors.spend import TOKEN_FIELDS, session_requests, session_spend
from sessions_app.web.request_chart import CHART_REQUESTS, request_chart
from sessions_app.web.spend_panel import usd

REQUESTS_PER_PAGE = 25
# Each kind of token as the summary names it, and the name of its ``data-`` attribute.
TOKEN_LABELS = dict(zip(TOKEN_FIELDS, ("input", "cache write", "cache read", "output"), strict=True))


def requests_panel(session: AgentSession, *, page: str | int | None = None) -> dict[str, Any]:
    """The summary, the chart and one page of rows; ``spend`` None when there is no request."""
    spend = session_spend(session)
    if not spend.requests:
        return {"spend": None}
    rows = session_requests(session)
    return {
        "spend": {
            "requests": spend.requests,
            "cost": f"{spend.cost_usd:.10f}",
            # Unknown only when no request has a price, as the dashboard's totals say.
            "cost_text": "—" if spend.unpriced == spend.requests else usd(spend.cost_usd),
            "unpriced": spend.unpriced,
            "tokens": [
                {
                    "name": name,
                    "attr": TOKEN_LABELS[name].replace(" ", "-"),
                    "label": TOKEN_LABELS[name],
                    "value": getattr(spend, name),
                    "text": f"{getattr(spend, name):,}",
                }
                for name in TOKEN_FIELDS
            ],
        },
        "chart": request_chart(list(rows[:CHART_REQUESTS]), total=spend.requests),
        "page": requests_page(session, page=page),
    }


def requests_page(session: AgentSession, *, page: str | int | None) -> Page[dict[str, Any]]:
    paginator: Paginator[ProviderRequest] = Paginator(session_requests(session), REQUESTS_PER_PAGE)
    found = paginator.get_page(page)
    # Ignored: the page's rows take the place of its models, as the session list's do.
    found.object_list = [request_row(row) for row in found.object_list]  # type: ignore[misc]
    return found  # type: ignore[return-value]


def request_row(row: ProviderRequest) -> dict[str, Any]:
    ratio: float | None = getattr(row, "cache_hit_ratio", None)
    return {
        "row": row,
        "tokens": [f"{getattr(row, name):,}" for name in TOKEN_FIELDS],
        "context": row.input_tokens + row.cache_creation_input_tokens + row.cache_read_input_tokens,
        "cost": "" if row.cost_usd is None else f"{row.cost_usd:.10f}",
        "cost_text": usd(row.cost_usd),
        "ttfb": _ms(row.ttfb_ms),
        "duration": _ms(row.duration_ms),
        "cache_hit": "—" if ratio is None else f"{ratio:.0%}",
        "status": str(row.status) if row.status is not None else "—",
        "transcript": row.source == RequestSource.TRANSCRIPT,
    }


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"
