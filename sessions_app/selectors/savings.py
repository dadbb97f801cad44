"""What compaction saved, in tokens and dollars (docs/PROXY.md, "What compaction saved").

A request of a session (a ``ProviderRequest``, proxied or reported by a transcript) would have carried,
without compaction, the tokens each compaction in force at the time took out of the context: for every
succeeded (not reverted) compaction of its session that finished before the request arrived, or that
the proxy made for that very request, its ``tokens_before − tokens_after``. Those tokens are priced at
the request's model's uncached input price: more than was saved where the provider would have read them
from its cache, which it bills lower.

Each request carries its figure (``ProviderRequest.saved_tokens``, kept by ``services.spend_rollup``
from ``saved_by_request``/``saved_at``, the definition's one statement in SQL); ``savings_by`` sums it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from functools import cache
from typing import Any

from django.db import connection
from django.db.models import F, Q, QuerySet, Sum

from compaction.model_prices import PER_TOKENS
from sessions_app.models import Compaction, CompactionStatus, ProviderRequest
from sessions_app.selectors import sql_rows
from sessions_app.selectors.usage import model_info

_IN_FORCE = Q(session__compactions__status=CompactionStatus.SUCCEEDED) & (
    Q(session__compactions__finished_at__lte=F("created_at")) | Q(session__compactions__pk=F("compacted_id"))
)
_SAVED = F("session__compactions__tokens_before") - F("session__compactions__tokens_after")


def saved_by_request(requests: QuerySet[ProviderRequest]) -> dict[int, int]:
    """What the compactions in force saved each of ``requests`` (absent: nothing), by its id: one
    grouped query joining the requests to their sessions' compactions."""
    rows = (
        requests.filter(_IN_FORCE, session__compactions__tokens_after__isnull=False)
        .values("pk")
        .annotate(saved=Sum(_SAVED))
        .order_by()
    )
    return {row["pk"]: int(row["saved"] or 0) for row in rows}


def saved_at(session_id: int, created_at: datetime, compacted_id: int | None) -> int:
    """What a request of the session arriving at ``created_at`` (made from compaction ``compacted_id``,
    if any) is saved by the compactions in force now: the figure a new row starts with. (Every
    recorded exchange asks: SQL written once, as ``saved_by_request``'s filter says it.)"""
    worked_out = saved_at_sql(session_id, created_at, compacted_id)
    with sql_rows.prepared_cursor() as cursor:
        cursor.execute(worked_out.sql, worked_out.params)
        return int(cursor.fetchone()[0])


def saved_at_sql(session_id: int, created_at: datetime, compacted_id: int | None) -> sql_rows.Computed:
    """``saved_at`` as an expression, for the ``saved_tokens`` of a row an ``INSERT`` writes (a round
    trip fewer; under the session's lock, the statement reads the compactions in force as it starts)."""
    arrived = connection.ops.adapt_datetimefield_value(created_at)
    params = [session_id, CompactionStatus.SUCCEEDED, arrived, compacted_id]
    return sql_rows.Computed("saved_tokens", f"SELECT COALESCE(({_saved_at_sql()}), 0)", params)


@cache
def _saved_at_sql() -> str:
    qn = connection.ops.quote_name
    column = {name: qn(str(Compaction._meta.get_field(name).column)) for name in _SAVED_AT_FIELDS}  # type: ignore[union-attr]
    return (
        f"SELECT SUM({column['tokens_before']} - {column['tokens_after']}) FROM {qn(Compaction._meta.db_table)}"
        f" WHERE {column['session']} = %s AND {column['status']} = %s AND {column['tokens_after']} IS NOT NULL"
        f" AND ({column['finished_at']} <= %s OR {column['id']} = %s)"
    )


_SAVED_AT_FIELDS = ("id", "session", "status", "tokens_before", "tokens_after", "finished_at")


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
    group for all). One aggregate query of the rows' ``saved_tokens`` per group and model; the dollars
    are worked out per model after (``savings_priced``)."""
    fields = tuple(group)
    sums = requests.exclude(saved_tokens=0).values(*fields, "model").annotate(saved=Sum("saved_tokens")).order_by()
    return savings_priced((tuple(row[name] for name in fields), row["model"], row["saved"]) for row in sums)


def savings_priced(sums: Iterable[tuple[tuple[Any, ...], str, int | None]]) -> dict[tuple[Any, ...], Savings]:
    """(group, model, tokens) summed per group, each model's tokens at its input price."""
    prices: dict[str, Decimal | None] = {}
    found: dict[tuple[Any, ...], Savings] = {}
    for key, model, summed in sums:
        tokens = int(summed or 0)
        if model not in prices:
            prices[model] = model_info(model).input_price
        price = prices[model]
        saved = (
            Savings(tokens, Decimal(tokens) * price / PER_TOKENS, 0)
            if price is not None
            else Savings(tokens, Decimal(0), tokens)
        )
        found[key] = found.get(key, NONE) + saved
    return found
