"""The rollup of provider requests (``models.DailySpend``) and each request's ``saved_tokens``, moved
with the rows: a row written adds its figures to its bucket, a row brought up to date moves the
difference (its old figures out, the new in), a session deleted takes its rows out, and a compaction
coming into force or leaving it (a success, a revert) moves the saving of the session's requests it
covers (``selectors.savings``'s definition). Always inside the writer's transaction, with the
session's row locked, so a request recorded while a compaction of its session is applied is counted
by one of the two, never by neither or both.

A bucket is moved by an upsert that adds (``x = x + excluded.x``): two writers adding to the same
bucket at once both count, whatever the database."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from django.db import connection, transaction
from django.db.models import F

from sessions_app.models import COST_UNITS, AgentSession, DailySpend, ProviderRequest
from sessions_app.selectors import sql_rows
from sessions_app.selectors.savings import saved_at, saved_by_request

# A bucket: (project id, UTC day, user id or 0, API key id or 0, model).
Bucket = tuple[int, date, int, int, str]
SUMS = (
    "requests",
    "unpriced_requests",
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "output_tokens",
    "cost_units",
    "saved_tokens",
)
# What a row's figures are read from (its bucket's fields, then what it adds).
ROW_FIELDS = (
    "project_id",
    "created_at",
    "user_id",
    "api_key_id",
    "model",
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "output_tokens",
    "cost_usd",
    "saved_tokens",
)


class Deltas:
    """What buckets move by, summed before anything is written (one upsert per bucket)."""

    def __init__(self) -> None:
        self.by_bucket: dict[Bucket, list[int]] = defaultdict(lambda: [0] * len(SUMS))

    def add_row(self, row: Mapping[str, Any], sign: int = 1) -> None:
        """``row`` (``ROW_FIELDS``) in (``sign`` 1) or out (-1) of its bucket."""
        cost = row["cost_usd"]
        figures = (
            1,
            1 if cost is None else 0,
            row["input_tokens"],
            row["cache_creation_input_tokens"],
            row["cache_read_input_tokens"],
            row["output_tokens"],
            0 if cost is None else cost_units(cost),
            row["saved_tokens"],
        )
        sums = self.by_bucket[bucket_of(row)]
        for n, value in enumerate(figures):
            sums[n] += sign * value

    def add_saved(self, row: Mapping[str, Any], tokens: int) -> None:
        self.by_bucket[bucket_of(row)][SUMS.index("saved_tokens")] += tokens

    def apply(self) -> None:
        """Every bucket moved, in one order (two writers never wait on each other's buckets in turn)."""
        moved = sorted((bucket, sums) for bucket, sums in self.by_bucket.items() if any(sums))
        if not moved:
            return
        day = connection.ops.adapt_datefield_value
        with sql_rows.prepared_cursor() as cursor:
            for (project_id, on, user_id, key_id, model), sums in moved:
                cursor.execute(_UPSERT, [project_id, day(on), user_id, key_id, model, *sums])
        self.by_bucket.clear()


def request_inserted(row: ProviderRequest, saved: sql_rows.Computed) -> bool:
    """``row`` inserted unless its key is stored already (``sql_rows.insert_new``), its
    ``saved_tokens`` worked out by the statement (``saved``); when it was, its figures added to its
    bucket. On PostgreSQL in one statement, the bucket's upsert reading the saving the row got."""
    if connection.vendor != "postgresql":
        created = sql_rows.insert_new(row, "key", saved)
        if created:
            rows_added([row_figures(row)])
        return created
    deltas = Deltas()
    deltas.add_row({**row_figures(row), "saved_tokens": 0})
    ((bucket, sums),) = deltas.by_bucket.items()

    def upsert(inserted: str) -> sql_rows.Statement:
        project_id, on, user_id, key_id, model = bucket
        return sql_rows.Statement(
            _UPSERT_SAVED_FROM.format(inserted=inserted),
            [project_id, connection.ops.adapt_datefield_value(on), user_id, key_id, model, *sums],
        )

    return sql_rows.insert_new(row, "key", saved, then=upsert)


def cost_units(cost: Decimal) -> int:
    return int((Decimal(cost) * COST_UNITS).to_integral_value())


def bucket_of(row: Mapping[str, Any]) -> Bucket:
    at: datetime = row["created_at"]
    return (row["project_id"], utc_day(at), row["user_id"] or 0, row["api_key_id"] or 0, row["model"])


def utc_day(at: datetime) -> date:
    return at.astimezone(UTC).date()


def row_figures(row: ProviderRequest) -> dict[str, Any]:
    return {name: getattr(row, name) for name in ROW_FIELDS}


def rows_added(rows: Iterable[Mapping[str, Any]]) -> None:
    deltas = Deltas()
    for row in rows:
        deltas.add_row(row)
    deltas.apply()


def request_store(**fields: Any) -> ProviderRequest:
    """A ``ProviderRequest`` row made of ``fields`` as given (an import of rows, a fixture), with what
    the compactions in force saved it, added to the rollup; under its session's lock."""
    row = ProviderRequest(**fields)
    with transaction.atomic():
        AgentSession.objects.select_for_update().filter(pk=row.session_id).values_list("pk").first()
        row.saved_tokens = saved_at(row.session_id, row.created_at, row.compacted_id)
        row.save(force_insert=True)
        rows_added([row_figures(row)])
    return row


def session_rollup_remove(session: AgentSession) -> None:
    """Before the session's rows go (its deletion cascades to them): their figures out of the rollup."""
    deltas = Deltas()
    for row in ProviderRequest.objects.filter(session=session).values(*ROW_FIELDS).iterator():
        deltas.add_row(row, -1)
    deltas.apply()


def session_savings_refresh(session_id: int) -> int:
    """After a compaction of the session came into force or left it (inside that transaction, with the
    session locked): each of its requests' ``saved_tokens`` and their buckets brought to what the
    compactions in force say. One grouped query over the session's requests, an UPDATE per distinct
    change. How many requests changed."""
    rows = ProviderRequest.objects.filter(session_id=session_id)
    wanted = saved_by_request(rows)
    changed: dict[int, list[int]] = defaultdict(list)
    deltas = Deltas()
    for row in rows.values("pk", *ROW_FIELDS).iterator():
        delta = wanted.get(row["pk"], 0) - row["saved_tokens"]
        if delta:
            changed[delta].append(row["pk"])
            deltas.add_saved(row, delta)
    for delta, pks in changed.items():
        ProviderRequest.objects.filter(pk__in=pks).update(saved_tokens=F("saved_tokens") + delta)
    deltas.apply()
    return sum(len(pks) for pks in changed.values())


_TABLE = DailySpend._meta.db_table
# PostgreSQL and SQLite share this syntax; the unique constraint ``daily_spend_bucket`` is the target.
_UPSERT = f"""
    INSERT INTO {_TABLE} (project_id, day, user_id, api_key_id, model, {", ".join(SUMS)})
    VALUES (%s, %s, %s, %s, %s, {", ".join(["%s"] * len(SUMS))})
    ON CONFLICT (project_id, day, user_id, api_key_id, model) DO UPDATE
       SET {", ".join(f"{name} = {_TABLE}.{name} + excluded.{name}" for name in SUMS)}
"""
# ``_UPSERT`` of one row's figures, its saved tokens added from the ``{inserted}`` query's (the row's
# INSERT, returning its key and its ``saved_tokens``): no row there, nothing added.
_UPSERT_SAVED_FROM = f"""
    INSERT INTO {_TABLE} (project_id, day, user_id, api_key_id, model, {", ".join(SUMS)})
    SELECT %s, %s::date, %s, %s, %s, {", ".join(["%s"] * (len(SUMS) - 1))}, %s + {{inserted}}.saved_tokens
      FROM {{inserted}}
    ON CONFLICT (project_id, day, user_id, api_key_id, model) DO UPDATE
       SET {", ".join(f"{name} = {_TABLE}.{name} + excluded.{name}" for name in SUMS)}
"""
