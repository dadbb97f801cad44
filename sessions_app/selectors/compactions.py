"""Reads about compactions: whether one can be reverted now (the API, the page and the CLI give the
same reasons), and per-strategy totals of what one did."""

from __future__ import annotations

from datetime import datetime
from types import EllipsisType
from typing import Any

from django.utils import timezone

from sessions_app.errors import Conflict
from sessions_app.models import ACTIVE_COMPACTION_STATUSES, Compaction, CompactionStatus, SessionStatus


def revert_refusal(
    record: Compaction,
    *,
    now: datetime | None = None,
    newest_id: int | EllipsisType | None = ...,
    busy: bool | None = None,
) -> Conflict | None:
    """Why this compaction can't be reverted now (the 409 to answer), or None when it can. The page
    shows the same reasons the API answers with; a page listing many records passes the session's
    ``newest_id`` (newest revertible compaction) and ``busy`` (one queued or running) once."""
    now = now or timezone.now()
    if record.session.status != SessionStatus.ACTIVE:
        return Conflict(
            f"Session {record.session_id} is {record.session.status.replace('_', ' ')}; its compactions stay.",
            code="session_closed",
        )
    if record.status != CompactionStatus.SUCCEEDED:
        return Conflict(
            f"Only a succeeded compaction can be reverted; this one is {record.status}.", code="not_revertible"
        )
    if record.revertible_until is None:
        return Conflict("This compaction changed no message; there is nothing to revert.", code="not_revertible")
    if record.revertible_until < now:
        return Conflict("The revert window of this compaction has passed.", code="revert_window_passed")
    if newest_id is ...:
        newest_id = newest_revertible_id(record.session_id)
    if newest_id != record.pk:
        return Conflict("A newer compaction exists; revert that one first.", code="not_newest")
    if busy is None:
        busy = Compaction.objects.filter(session_id=record.session_id, status__in=ACTIVE_COMPACTION_STATUSES).exists()
    if busy:
        return Conflict("A compaction of this session is queued or running.", code="compaction_in_progress")
    return None


def newest_revertible_id(session_id: int) -> int | None:
    return (
        Compaction.objects.filter(
            session_id=session_id, status=CompactionStatus.SUCCEEDED, revertible_until__isnull=False
        )
        .order_by("-id")
        .values_list("id", flat=True)
        .first()
    )


# What a compaction record shows, in the API (``CompactionOut``) and in ``ctx compact --json``.
COMPACTION_FIELDS = (
    "id",
    "session",
    "level",
    "status",
    "trigger",
    "tokens_before",
    "tokens_after",
    "saved_tokens",
    "items",
    "error",
    "notes",
    "created_at",
    "started_at",
    "finished_at",
    "revertible_until",
    "reverted_at",
    "upto_seq",
    "attempts",
    "instructions",
)


def compaction_summary(record: Compaction) -> dict[str, Any]:
    """The record's ``COMPACTION_FIELDS`` as JSON-ready values (times in ISO 8601)."""
    out: dict[str, Any] = {}
    for name in COMPACTION_FIELDS:
        value = record.session_id if name == "session" else getattr(record, name)
        out[name] = value.isoformat() if isinstance(value, datetime) else value
    return out


def strategy_totals(items: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Items of a compaction summed per strategy: messages touched, tokens before and after."""
    totals: dict[str, dict[str, int]] = {}
    for item in items:
        entry = totals.setdefault(item["strategy"], {"messages": 0, "tokens_before": 0, "tokens_after": 0})
        entry["messages"] += 1 if item.get("seq") is not None else 0
        entry["tokens_before"] += item.get("tokens_before") or 0
        entry["tokens_after"] += item.get("tokens_after") or 0
    return totals
