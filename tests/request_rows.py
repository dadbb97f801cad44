"""A session's provider requests with figures of every kind (one unpriced, one from a transcript, one
that went upstream compacted), and the sums a page or a CSV must show, computed here from the rows."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from sessions_app.models import AgentSession, Compaction, ProviderRequest, RequestSource
from sessions_app.services import spend_rollup

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TOKENS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")


def requests_in(session: AgentSession, count: int, *, start: datetime = T0) -> list[ProviderRequest]:
    """``count`` requests a minute apart, oldest first: every seventh without a price, every fifth
    reported by a transcript, the second sent upstream as a compaction's context."""
    compaction = Compaction.objects.create(
        session=session, project_id=session.project_id, level="compact", status="succeeded", trigger="provider"
    )
    rows = []
    for n in range(count):
        transcript = n % 5 == 4
        rows.append(
            spend_rollup.request_store(
                key=uuid.uuid4(),
                session=session,
                project_id=session.project_id,
                user=session.owner,
                created_at=start + timedelta(minutes=n),
                model="mystery-model" if n % 7 == 6 else "claude-sonnet-4-5",
                input_tokens=100 + 37 * n,
                cache_creation_input_tokens=1000 * (n % 3),
                cache_read_input_tokens=2500 * n,
                output_tokens=40 + n,
                cost_usd=None if n % 7 == 6 else Decimal("0.0012345678") * (n + 1),
                ttfb_ms=None if transcript else 250.5 + n,
                duration_ms=None if transcript else 1800.25 + 10 * n,
                status=None if transcript else 200,
                compacted=compaction if n == 1 else None,
                source=RequestSource.TRANSCRIPT if transcript else RequestSource.PROXY,
            )
        )
    return rows


def sums(rows: list[ProviderRequest]) -> dict[str, Any]:
    priced = [r.cost_usd for r in rows if r.cost_usd is not None]
    return {
        "requests": len(rows),
        "cost_usd": sum(priced, Decimal(0)),
        "unpriced": len(rows) - len(priced),
        **{name: sum(getattr(r, name) for r in rows) for name in TOKENS},
    }
