"""The dashboard's spend: what the project's provider requests used and cost over its days, per
person, API key, model and day, as small tables of formatted numbers."""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from sessions_app.selectors import spend

if TYPE_CHECKING:
    from sessions_app.models import Project


SPEND_TITLES = {"owner": "Per person", "key": "Per API key", "model": "Per model", "day": "Per day"}


def spend_tables(project: Project, *, days: int) -> list[dict[str, Any]]:
    """The dashboard's spend over its days, one small table per grouping (``selectors.spend``), the
    numbers formatted; a day without requests is left out of the page (not of the API or the CSV)."""
    tables = []
    for by in ("owner", "key", "model", "day"):
        found = spend.project_spend(project=project, days=days, by=by)
        rows = [row for row in found.rows if row.requests]
        tables.append(
            {
                "by": by,
                "title": SPEND_TITLES[by],
                "since": found.since,
                "rows": [_spend_cells(row, by) for row in rows],
                "total": _spend_cells(found.total, by),
            }
        )
    return tables


def _spend_cells(row: spend.SpendRow, by: str) -> dict[str, Any]:
    # The session list filtered to the person or key (a model's requests may name a dated version
    # of the sessions' model, so models get no link).
    value = row.group.get({"owner": "owner", "key": "key"}.get(by, ""))
    return {
        "label": row.label,
        "value": value,
        "filter": f"{by}={value}" if by in ("owner", "key") and value is not None else "",
        "requests": f"{row.requests:,}",
        "tokens": [f"{getattr(row, name):,}" for name in spend.TOKEN_FIELDS],
        "cost": "" if row.cost_usd is None else f"{row.cost_usd:.10f}",
        "cost_text": usd(row.cost_usd),
        "unpriced": row.unpriced_requests,
        "saved_tokens": f"{row.saved_tokens:,}",
        "saved": f"{row.saved_usd:.10f}",
        "saved_text": usd(row.saved_usd),
    }


def usd(amount: Decimal | None) -> str:
    """Dollars as the page shows them: cents from $1 on, four places below, "—" when unknown."""
    if amount is None:
        return "—"
    if amount >= 1 or amount == 0:
        return f"${amount:,.2f}"
    return f"${amount:.4f}" if amount >= Decimal("0.0001") else "<$0.0001"
