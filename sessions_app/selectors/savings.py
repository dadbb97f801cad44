"""What compaction saved, in tokens and dollars (docs/PROXY.md, "What compaction saved").

A request of a session (a ``ProviderRequest``, proxied or reported by a transcript) would have carried,
without compaction, the tokens each compaction in force at the time took out of the context: for every
succeeded (not reverted) compaction of its session that finished before the request arrived, or that
the proxy made for that very request, its ``tokens_before − tokens_after``. Those tokens are priced at
the request's model's uncached input price: more than was saved where the provider would have read them
from its cache, which it bills lower."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import F, Q, QuerySet, Sum

from compaction.model_prices import PER_TOKENS
from sessions_app.models import CompactionStatus, ProviderRequest
from sessions_app.selectors.usage import model_info

_IN_FORCE = Q(session__compactions__status=CompactionStatus.SUCCEEDED) & (
    Q(session__compactions__finished_at__lte=F("created_at")) | Q(session__compactions__pk=F("compacted_id"))
)
_SAVED = F("session__compactions__tokens_before") - F("session__compactions__tokens_after")


@dataclass(frozen=True)
class Savings:
    tokens: int  # input tokens the requests did not send
    usd: Decimal  # those tokens at their models' input prices, over the models that have one
    unpriced_tokens: int  # of ``tokens``, those of requests whose model has no input price

    def __add__(self, other: Savings) -> Savings:
        return Savings(self.tokens + other.tokens, self.usd + other.usd, self.unpriced_tokens + other.unpriced_tokens)


NONE = Savings(0, Decimal(0), 0)


def savings_by(requests: QuerySet[ProviderRequest], group: Iterable[str] = ()) -> dict[tuple[Any, ...], Savings]:
    """What compaction saved the ``requests``, per ``group`` (the values of those fields; ``()``: one
    group for all). One aggregate query joining each request to its session's compactions, per group
    and model; the dollars are worked out per model after."""
    fields = tuple(group)
    sums = (
        requests.filter(_IN_FORCE, session__compactions__tokens_after__isnull=False)
        .values(*fields, "model")
        .annotate(saved=Sum(_SAVED))
        .order_by()
    )
    prices: dict[str, Decimal | None] = {}
    found: dict[tuple[Any, ...], Savings] = {}
    for row in sums:
        tokens = int(row["saved"] or 0)
        model = row["model"]
        if model not in prices:
            prices[model] = model_info(model).input_price
        price = prices[model]
        saved = (
            Savings(tokens, Decimal(tokens) * price / PER_TOKENS, 0)
            if price is not None
            else Savings(tokens, Decimal(0), tokens)
        )
        key = tuple(row[name] for name in fields)
        found[key] = found.get(key, NONE) + saved
    return found
