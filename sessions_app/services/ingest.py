"""Messages into a session: validated elsewhere (``compaction.messages``), stored here in order, all
or nothing, with the session's running totals and its tool-call index kept in step."""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, date, datetime
from functools import cache, partial
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from compaction.messages import NormalizedMessage
from sessions_app import metrics
from sessions_app.engine import offline_tokenizer
from sessions_app.errors import Conflict, InvalidInput
from sessions_app.models import (
    AgentSession,
    Message,
    SessionStatus,
    ToolUse,
)
from sessions_app.selectors import sql_rows, usage
from sessions_app.services import redaction

log = logging.getLogger(__name__)


@dataclass
class AppendResult:
    messages: list[Message]
    created: int
    session: AgentSession
    # client_ids that were already stored with another role or content: the stored message is answered
    mismatched: frozenset[str] = frozenset()


def message_append(
    *, session: AgentSession, messages: list[NormalizedMessage], after_seq: int | None = None
) -> AppendResult:
    """Store a batch of validated messages at the end of a session, all or nothing.

    Counting happens before the lock (it is the slow part); seq assignment, the tool-call check,
    the insert and the running totals happen under the session's row lock, so concurrent appends
    get gapless seqs and totals that equal the sum over stored rows. A message whose client_id is
    already stored is not stored again: the stored one is answered in its place. What the new
    messages set off is the caller's next step (``tasks.followup_send``). ``after_seq``: store them
    only right after that message (else ``Conflict``, code ``moved_on``, nothing stored).
    """
    started = time.monotonic()
    # Secrets out first: what is counted, compared and stored is the redacted copy.
    messages, found = redaction.messages_redact(session.project, messages)
    tokenizer = offline_tokenizer()
    counts = [tokenizer.count_message(m.role, m.content) for m in messages]
    now = timezone.now()
    with transaction.atomic():
        locked = lock_open_session(session)
        if after_seq is not None and locked.last_seq != after_seq:
            raise Conflict(f"Session {locked.pk} has moved on past seq {after_seq}.", code="moved_on")
        client_ids = [m.client_id for m in messages if m.client_id]
        existing = stored_by_client_id(locked, client_ids) if client_ids else {}
        is_fresh = [not (m.client_id and m.client_id in existing) for m in messages]
        fresh = [(m, n) for m, n, new in zip(messages, counts, is_fresh, strict=True) if new]
        check_tool_ids(locked, [m for m, _ in fresh])
        rows = _rows(locked, fresh, now)
        if rows:
            _store(locked, rows, now, sum((f for f, new in zip(found, is_fresh, strict=True) if new), Counter()))
            transaction.on_commit(partial(_appended, locked, rows, time.monotonic() - started))
    fresh_rows = iter(rows)
    ordered = [existing[m.client_id] if m.client_id in existing else next(fresh_rows) for m in messages]
    mismatched = frozenset(
        m.client_id
        for m in messages
        if m.client_id is not None
        and m.client_id in existing
        and (existing[m.client_id].role, existing[m.client_id].content) != (m.role, m.content)
    )
    return AppendResult(messages=ordered, created=len(rows), session=locked, mismatched=mismatched)


def _appended(session: AgentSession, rows: list[Message], seconds: float) -> None:
    """Once the append committed: the metrics, and one log line with its figures."""
    tokens = sum(row.tokens for row in rows)
    metrics.messages_appended(messages=len(rows), tokens=tokens, seconds=seconds)
    log.info(
        "appended %s messages (%s tokens) to session %s",
        len(rows),
        tokens,
        session.pk,
        extra={
            "event": "append",
            "session": session.pk,
            "messages": len(rows),
            "tokens": tokens,
            "last_seq": session.last_seq,
            "message_tokens": session.message_tokens,
            "duration_ms": round(seconds * 1000, 1),
        },
    )


def _rows(session: AgentSession, fresh: list[tuple[NormalizedMessage, int]], now: datetime) -> list[Message]:
    """Unsaved rows for the new messages, numbered after the session's last seq."""
    rows = []
    for seq, (msg, tokens) in enumerate(fresh, start=session.last_seq + 1):
        created_at = msg.created_at or now
        if timezone.is_naive(created_at):
            created_at = created_at.replace(tzinfo=UTC)
        rows.append(
            Message(
                session=session,
                seq=seq,
                role=msg.role,
                content=msg.content,
                tokens=tokens,
                client_id=msg.client_id,
                created_at=created_at,
                metadata=msg.metadata,
            )
        )
    return rows


def _store(session: AgentSession, rows: list[Message], now: datetime, redacted: Counter[str]) -> None:
    """Insert the rows and their tool calls; move the session's running totals and its redaction
    audit on (under its lock)."""
    uses = [ToolUse(session=session, tool_use_id=tid, seq=row.seq) for row in rows for tid in _tool_use_ids(row)]
    session.last_seq = rows[-1].seq
    session.message_count += len(rows)
    session.active_message_count += len(rows)
    session.message_tokens += sum(row.tokens for row in rows)
    session.last_activity_at = now
    # How full it is now, in the same UPDATE (the level, when it moves, is the next step's: it may
    # announce the change; ``services.webhook_events.session_level_record``).
    session.usage_percent = usage.session_usage(session).usage_percent
    totals = sql_rows.update_statement(
        session,
        [
            "last_seq",
            "message_count",
            "active_message_count",
            "message_tokens",
            "usage_percent",
            "last_activity_at",
            "updated_at",
            *redaction.redactions_add(session, redacted),
        ],
    )
    day = timezone.localdate(now)
    tokens = sum(row.tokens for row in rows)
    ingested = sql_rows.Statement(_DAILY_INGEST_SQL, _daily_ingest_params(session, day, tokens, len(rows)))
    # One round trip on PostgreSQL: the tool calls, the totals and the day's figures go with the rows'
    # INSERT (the row lock that every append of the project takes on the day's figures is then held
    # only until the commit that follows).
    sql_rows.insert_rows(rows, before=[*sql_rows.insert_statements(uses), totals, ingested])


# The dashboard's per-day figures (models.DailyIngest). Written out: an upsert the ORM has no single
# statement for, on every append (PostgreSQL and SQLite share this syntax).
_DAILY_INGEST_SQL = """
    INSERT INTO sessions_app_dailyingest (project_id, day, model, tokens, messages) VALUES (%s, %s, %s, %s, %s)
    ON CONFLICT (project_id, day, model) DO UPDATE
       SET tokens = sessions_app_dailyingest.tokens + excluded.tokens,
           messages = sessions_app_dailyingest.messages + excluded.messages
"""


def stored_message_rewrite(
    locked: AgentSession, row: Message, message: NormalizedMessage, tokens: int, *, client_id: bool = False
) -> None:
    """A stored message given new content (its response grew, or came whole after it was cut), the
    session's totals, the day's figures and the exact count following; inside the caller's
    transaction, with the session locked. ``message`` is redacted already (``redaction.message_redact``,
    before it was counted). Its tool-use rows are the caller's to keep right."""
    audit = redaction.redactions_add(locked, redaction.markers_added(row.content, message.content))
    delta = tokens - row.tokens
    row.content, row.tokens, row.tokens_exact, row.metadata = message.content, tokens, None, message.metadata
    fields = ["content", "tokens", "tokens_exact", "metadata"]
    if client_id:
        row.client_id = message.client_id
        fields.append("client_id")
    sql_rows.update(row, fields)
    locked.message_tokens += delta
    daily_ingest_add(locked, day=timezone.localdate(row.received_at), tokens=delta, messages=0)
    locked.exact_upto_seq = None  # the exact count described the message as it was
    locked.last_activity_at = timezone.now()
    sql_rows.update(locked, ["message_tokens", "exact_upto_seq", "last_activity_at", "updated_at", *audit])


def daily_ingest_add(session: AgentSession, *, day: date, tokens: int, messages: int) -> None:
    """Add what a session received on ``day`` to its project's figures (inside the caller's transaction)."""
    with sql_rows.prepared_cursor() as cursor:
        cursor.execute(_DAILY_INGEST_SQL, _daily_ingest_params(session, day, tokens, messages))


def _daily_ingest_params(session: AgentSession, day: date, tokens: int, messages: int) -> list[Any]:
    return [session.project_id, day, session.model, tokens, messages]


_UNREAD_UNDER_LOCK = frozenset({"system_prompt", "tools"})


@cache
def _lock_sql(columns: str) -> str:
    """The session's row locked by id, reading ``columns`` (of alias ``s``); on SQLite a plain read
    (its transactions lock the whole database)."""
    table = sql_rows.table(AgentSession)
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    return f"SELECT {columns} FROM {table} s WHERE s.id = %s{lock}"


def session_row_lock(session_id: int) -> None:
    """Lock the session's row (inside a transaction) without reading it: what orders a write with
    the others of the session's (the statement written once, as ``lock_open_session``'s)."""
    with sql_rows.prepared_cursor() as cursor:
        cursor.execute(_lock_sql("s.id"), [session_id])


def lock_open_session(session: AgentSession) -> AgentSession:
    """The session's row, locked (inside a transaction), if it still takes messages."""
    # The long texts aren't needed under the lock (the counts of them are columns of their own), and
    # the project with its policy was loaded with ``session``: neither is read again on every append.
    # Written once (``selectors.sql_rows``): every append and proxied exchange takes this lock.
    with sql_rows.prepared_cursor() as cursor:
        cursor.execute(_lock_sql(sql_rows.select_list(AgentSession, "s", _UNREAD_UNDER_LOCK)), [session.pk])
        row = cursor.fetchone()
    if row is None:
        raise AgentSession.DoesNotExist(f"Session {session.pk} is gone.")
    locked = sql_rows.instance(AgentSession, row, _UNREAD_UNDER_LOCK)
    locked.project = session.project
    if locked.status != SessionStatus.ACTIVE:
        continued_in = usage.continuation_of(locked)
        raise Conflict(
            f"Session {locked.pk} is {locked.status.replace('_', ' ')}; "
            + (
                f"append to its continuation, session {continued_in}, instead."
                if continued_in
                else "it takes no more messages."
            ),
            code="session_closed",
            extra={"continued_in": continued_in},
        )
    return locked


def stored_by_client_id(session: AgentSession, client_ids: list[str]) -> dict[str, Message]:
    """The session's stored messages with these client ids (SQL written once: most appends ask)."""
    among, params = sql_rows.any_of("m.client_id", client_ids)
    table = sql_rows.table(Message)
    sql = f"SELECT {sql_rows.select_list(Message, 'm')} FROM {table} m WHERE m.session_id = %s AND {among}"
    with sql_rows.prepared_cursor() as cursor:
        cursor.execute(sql, [session.pk, *params])
        found = [sql_rows.instance(Message, row) for row in cursor.fetchall()]
    return {message.client_id: message for message in found if message.client_id is not None}


def stored_ids_and_contents(session: AgentSession, seqs: list[int]) -> dict[int, tuple[str | None, Any]]:
    """The client id and content of the session's messages at these seqs (written once: the proxy
    asks on every exchange where a request's history meets the stored one)."""
    if not seqs:
        return {}
    among, params = sql_rows.any_of("m.seq", seqs)
    sql = f"SELECT m.seq, m.client_id, m.content FROM {sql_rows.table(Message)} m WHERE m.session_id = %s AND {among}"
    with sql_rows.prepared_cursor() as cursor:
        cursor.execute(sql, [session.pk, *params])
        found = cursor.fetchall()
    return {seq: (cid, sql_rows.converted(Message, "content", value)) for seq, cid, value in found}


def _tool_uses_stored(session: AgentSession, tool_use_ids: list[str]) -> set[str]:
    """Which of these tool-call ids the session holds."""
    among, params = sql_rows.any_of("t.tool_use_id", tool_use_ids)
    sql = f"SELECT t.tool_use_id FROM {sql_rows.table(ToolUse)} t WHERE t.session_id = %s AND {among}"
    with sql_rows.prepared_cursor() as cursor:
        cursor.execute(sql, [session.pk, *params])
        return {tool_use_id for (tool_use_id,) in cursor.fetchall()}


def _tool_use_ids(row: Message) -> list[str]:
    if isinstance(row.content, str):
        return []
    return [b["id"] for b in row.content if isinstance(b, dict) and b.get("type") == "tool_use"]


def check_tool_ids(session: AgentSession, messages: list[NormalizedMessage]) -> None:
    """Every tool_use id is new in the session (a result must name exactly one call: Anthropic refuses
    a request that holds an id twice), and every tool_result answers a call stored before it or
    earlier in the batch. One query for both."""
    ids = [tid for msg in messages for tid in msg.tool_use_ids]
    seen: set[str] = set()
    twice = next((tid for tid in ids if tid in seen or seen.add(tid)), None)  # type: ignore[func-returns-value]
    if twice is not None:
        raise _used_twice(twice)
    seen_in_batch: set[str] = set()
    needed: dict[str, int] = {}
    for index, msg in enumerate(messages):
        for result_id in msg.tool_result_ids:
            if result_id not in seen_in_batch:
                needed.setdefault(result_id, index)
        seen_in_batch.update(msg.tool_use_ids)
    if not ids and not needed:
        return
    stored = _tool_uses_stored(session, [*ids, *needed])
    twice = next((tid for tid in ids if tid in stored), None)
    if twice is not None:
        raise _used_twice(twice)
    missing = [tid for tid in needed if tid not in stored]
    if missing:
        raise InvalidInput(
            f"tool_result for {missing[0]!r} has no earlier tool_use with that id in this session"
            + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
            + ".",
            code="unknown_tool_use_id",
        )


def _used_twice(tool_use_id: str) -> InvalidInput:
    return InvalidInput(
        f"tool_use id {tool_use_id!r} is used twice in this session; every tool call needs an id of its own.",
        code="duplicate_tool_use_id",
    )
