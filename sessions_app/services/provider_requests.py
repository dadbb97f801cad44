"""Rows of ``ProviderRequest``: what one request a provider answered used, what that cost at the
model's prices (``selectors.prices.price_of``), how long it took, what compaction saved it; the
rollup (``spend_rollup``) moved with it. ``selectors.spend`` reads them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from sessions_app.models import AgentSession, ProviderRequest, RequestSource
from sessions_app.selectors.prices import price_of
from sessions_app.selectors.savings import saved_at_sql
from sessions_app.services import ingest, spend_rollup
from sessions_app.services.provider_usage import Used


@dataclass(frozen=True)
class Answered:
    """A request the upstream answered, as its row records it."""

    key: uuid.UUID  # the exchange's, made when it arrived
    arrived_at: datetime
    status: int
    model: str  # the request's; the answer's own wins when it names one
    used: Used | None = None  # None: the answer reported no usage (an error, a note in its place)
    user_id: int | None = None
    api_key_id: int | None = None
    ttfb_ms: float | None = None
    duration_ms: float | None = None
    compacted_id: int | None = None
    estimated: bool = False  # ``used`` is ctxweb's estimate: the answer reported none


def provider_request_record(
    *, session: AgentSession, answered: Answered, source: str = RequestSource.PROXY
) -> ProviderRequest:
    """The request's row in ``session``; the one written already when its recording runs again."""
    used = answered.used or Used()
    model = used.model or answered.model[:200]
    with transaction.atomic():
        # The session's lock orders this row with a compaction applied meanwhile (spend_rollup).
        ingest.session_row_lock(session.pk)
        return _record(session, answered, used, model, source)


def _record(session: AgentSession, answered: Answered, used: Used, model: str, source: str) -> ProviderRequest:
    row = ProviderRequest(
        key=answered.key,
        session=session,
        project_id=session.project_id,
        api_key_id=answered.api_key_id,
        user_id=answered.user_id,
        created_at=answered.arrived_at,
        model=model,
        input_tokens=used.tokens.input,
        cache_creation_input_tokens=used.tokens.cache_write,
        cache_read_input_tokens=used.tokens.cache_read,
        output_tokens=used.tokens.output,
        service_tier=used.service_tier,
        cost_usd=price_of(model, used.tokens, at=answered.arrived_at) if model else None,
        ttfb_ms=answered.ttfb_ms,
        duration_ms=answered.duration_ms,
        status=answered.status,
        compacted_id=answered.compacted_id,
        source=source,
        estimated=answered.estimated,
    )
    # One statement, what the compactions in force saved the request included; a recording run again writes none.
    saved = saved_at_sql(session.pk, answered.arrived_at, answered.compacted_id)
    if not spend_rollup.request_inserted(row, saved):  # its figures added to the rollup with it
        return ProviderRequest.objects.get(key=answered.key)
    return row
