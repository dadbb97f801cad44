"""What a session's provider requests used and cost: its rows of ``ProviderRequest``, newest first
(``session_requests``), and their sums (``session_spend``)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Count, F, FloatField, Q, QuerySet, Sum
from django.db.models.functions import Cast, NullIf

from sessions_app.models import AgentSession, ProviderRequest

TOKEN_FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")


def session_requests(session: AgentSession) -> QuerySet[ProviderRequest]:
    """The session's requests, newest first, each with its ``cache_hit_ratio``: the part of what the
    model read that came from the cache (None when it read nothing)."""
    read = F("input_tokens") + F("cache_creation_input_tokens") + F("cache_read_input_tokens")
    ratio = Cast("cache_read_input_tokens", FloatField()) / Cast(NullIf(read, 0), FloatField())
    rows = ProviderRequest.objects.filter(session=session).annotate(cache_hit_ratio=ratio)
    return rows.order_by("-created_at", "-pk")


@dataclass(frozen=True)
class Spend:
    requests: int
    input_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    output_tokens: int
    cost_usd: Decimal  # over the requests whose model has a price
    unpriced: int  # requests whose model has no price: their tokens are counted, not their cost


def session_spend(session: AgentSession) -> Spend:
    """The sums over the session's requests: tokens by kind and cost. One query."""
    totals = ProviderRequest.objects.filter(session=session).aggregate(
        requests=Count("pk"),
        unpriced=Count("pk", filter=Q(cost_usd__isnull=True)),
        cost_usd=Sum("cost_usd"),
        **{name: Sum(name) for name in TOKEN_FIELDS},
    )
    return Spend(
        requests=totals["requests"],
        unpriced=totals["unpriced"],
        cost_usd=Decimal(totals["cost_usd"] or 0),
        **{name: int(totals[name] or 0) for name in TOKEN_FIELDS},
    )
