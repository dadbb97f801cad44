"""Compaction lifecycle: queue one per session, claim it in a worker, plan outside any transaction,
apply in one transaction to exactly the planned messages, fail without changing anything.

The engine (``compaction.reversible`` / ``compaction.summarize``) works on a snapshot; this module is the
only place that turns its plans into rows. Token figures in Compaction records and their items are
calibrated (the same units as STATUS); message rows keep raw offline counts.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from compaction.errors import EngineError
from compaction.summarize import SummaryPlan
from compaction.types import Level

from . import queueing, selectors
from .errors import Conflict
from .models import (
    CONTEXT_STATES,
    FALLBACK_NOTE,
    AgentSession,
    Checkpoint,
    Compaction,
    CompactionStatus,
    Message,
    MessageBackup,
    MessageState,
    SessionStatus,
)
from .planning import Outcome, Snapshot, offline_summarizer, plan, snapshot

log = logging.getLogger(__name__)

# Three failures in a row pause automatic compaction for a session until a manual one succeeds.
MAX_FAILURES = 3
# A compaction whose worker keeps dying (or whose message keeps getting lost) is failed after this.
MAX_ATTEMPTS = 8


# ----------------------------------------------------------------------------- queueing


def compaction_request(
    *,
    session: AgentSession,
    level: str,
    user: AbstractBaseUser | None,
    instructions: str = "",
    trigger: str = "manual",
    enqueue: bool = True,
) -> Compaction:
    """Queue a compaction; the worker picks it up once this transaction commits. One at a time per
    session: the database's partial unique constraint refuses a second queued or running one."""
    if session.status != SessionStatus.ACTIVE:
        raise Conflict(f"Session {session.pk} is {session.status.replace('_', ' ')}.", code="session_closed")
    try:
        with transaction.atomic():
            record = Compaction.objects.create(
                session=session,
                level=level,
                trigger=trigger,
                requested_by=user if user is not None and user.is_authenticated else None,
                instructions=instructions,
            )
    except IntegrityError:
        raise Conflict(
            "A compaction of this session is already queued or running; wait for it to finish.",
            code="compaction_in_progress",
        ) from None
    if enqueue:
        _enqueue(record.pk)
    return record


def _enqueue(compaction_id: int) -> None:
    from .tasks import run_compaction  # tasks import this module

    transaction.on_commit(lambda: queueing.send(run_compaction, compaction_id))


def auto_level(session: AgentSession) -> Level | None:
    """The level an append should queue a compaction for, or None. Called under the session's row
    lock, from the cached totals. A session that has not grown by the policy's minimum saving since
    its last compaction isn't compacted again (no churn after a skip, a failure or a revert)."""
    policy = selectors.policy_for(session)
    if session.status != SessionStatus.ACTIVE or session.auto_paused:
        return None
    if not selectors.auto_compact_enabled(session, policy):
        return None
    usage = selectors.session_usage(session, policy=policy)
    if usage.level < Level.COMPACT:
        return None
    level = usage.level
    if level == Level.HANDOFF and session.handoffs.filter(checkpoint__compaction__isnull=False).exists():
        level = Level.SUMMARIZE  # one automatic handoff document per session; continuing is the agent's call
    last = session.compactions.order_by("-id").values("status", "tokens_before", "tokens_after").first()
    if last is not None:
        if last["status"] in (CompactionStatus.QUEUED, CompactionStatus.RUNNING):
            return None
        baseline = last["tokens_after"] if last["status"] == CompactionStatus.SUCCEEDED else last["tokens_before"]
        if baseline is not None and usage.used - baseline < policy.min_saving_tokens:
            return None
    return level


def auto_queue(session: AgentSession) -> Compaction | None:
    level = auto_level(session)
    if level is None:
        return None
    try:
        with transaction.atomic():
            record = Compaction.objects.create(session=session, level=level.value, trigger="auto")
    except IntegrityError:  # another process queued one first
        return None
    _enqueue(record.pk)
    return record


# ----------------------------------------------------------------------------- running


def claim(compaction_id: int) -> bool:
    """Take a queued compaction, or reclaim a running one whose worker died (started longer ago than
    the hard time limit). A conditional UPDATE: of several workers, exactly one wins."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 30)
    claimed = Compaction.objects.filter(
        Q(status=CompactionStatus.QUEUED) | Q(status=CompactionStatus.RUNNING, started_at__lt=stale), pk=compaction_id
    ).update(status=CompactionStatus.RUNNING, started_at=now, attempts=F("attempts") + 1)
    return claimed == 1


def release_for_retry(compaction_id: int, error: str) -> None:
    """A transient failure: back to queued so the retried task can claim it again."""
    Compaction.objects.filter(pk=compaction_id, status=CompactionStatus.RUNNING).update(
        status=CompactionStatus.QUEUED, error=f"retrying: {error}"[:2000]
    )


def compaction_run(compaction_id: int, *, fallback_reason: str = "") -> str:
    """Claim, plan outside any transaction, apply. Transient engine errors propagate (the task
    retries them); anything else marks the compaction failed and changes no message.
    ``fallback_reason``: the model kept failing, so the offline summarizer stands in (and says so)."""
    if not claim(compaction_id):
        return "not-claimed"
    record = Compaction.objects.select_related("session", "session__project", "session__project__policy").get(
        pk=compaction_id
    )
    session = record.session
    try:
        snap = snapshot(session)
        summarizer = offline_summarizer(snap.policy) if fallback_reason else None
        manual_handoff = record.level == Level.HANDOFF.value and record.trigger == "manual"
        outcome = plan(
            snap,
            # A manual handoff writes its own summary of everything; it only needs the sizes here.
            Level.COMPACT.value if manual_handoff else record.level,
            summarizer=summarizer,
            instructions=record.instructions,
            force=record.trigger == "manual",
        )
        if fallback_reason and outcome.summary is not None:
            outcome.notes.append(f"{FALLBACK_NOTE} ({fallback_reason}); the offline extractive summary was used.")
    except EngineError as exc:
        if not exc.permanent:
            raise
        compaction_fail(compaction_id, str(exc))
        return "failed"
    except Exception as exc:  # a bug must not leave the record running forever
        log.exception("compaction %s crashed while planning", compaction_id)
        compaction_fail(compaction_id, f"internal error: {type(exc).__name__}")
        return "failed"
    if manual_handoff:
        from .handoffs import handoff_from_compaction

        return handoff_from_compaction(record, snap, outcome)
    try:
        result = apply(record, snap, outcome)
        # Escalation: compact, summarize, and only when the session is still too full, the handoff document.
        if record.level == Level.HANDOFF.value and result in ("succeeded", "skipped"):
            record.refresh_from_db()
            if record.tokens_after >= snap.policy.handoff * snap.window:
                from .handoffs import handoff_auto_document

                handoff_auto_document(record)
                return "succeeded"
        return result
    except EngineError as exc:
        if not exc.permanent:
            raise
        compaction_fail(compaction_id, str(exc))
        return "failed"
    except Exception as exc:
        log.exception("compaction %s crashed while applying", compaction_id)
        compaction_fail(compaction_id, f"internal error: {type(exc).__name__}")
        return "failed"


def compaction_fail(compaction_id: int, error: str) -> None:
    with transaction.atomic():
        record = Compaction.objects.select_for_update().get(pk=compaction_id)
        if record.status not in (CompactionStatus.RUNNING, CompactionStatus.QUEUED):
            return
        session = AgentSession.objects.select_for_update().get(pk=record.session_id)
        record.status = CompactionStatus.FAILED
        record.error = error[:2000]
        record.finished_at = timezone.now()
        record.save(update_fields=["status", "error", "finished_at"])
        session.compaction_failures += 1
        if session.compaction_failures >= MAX_FAILURES:
            session.auto_paused = True
        session.save(update_fields=["compaction_failures", "auto_paused", "updated_at"])


def lock_running(record: Compaction) -> tuple[AgentSession, Compaction] | None:
    """Inside a transaction: the session and the record, locked — or None when the record is no
    longer running (another worker reclaimed it after this one looked dead)."""
    session = AgentSession.objects.select_for_update().get(pk=record.session_id)
    current = Compaction.objects.select_for_update().get(pk=record.pk)
    return (session, current) if current.status == CompactionStatus.RUNNING else None


def apply(record: Compaction, snap: Snapshot, outcome: Outcome) -> str:
    """Write the plan in one transaction, to exactly the planned messages as they were planned."""
    policy = snap.policy
    now = timezone.now()
    with transaction.atomic():
        locked = lock_running(record)
        if locked is None:
            return "lost-claim"
        session, current = locked
        current.upto_seq = snap.upto_seq
        current.tokens_before = outcome.tokens_before
        if (outcome.saved < policy.min_saving_tokens and record.trigger == "auto") or outcome.saved <= 0:
            current.status = CompactionStatus.SKIPPED
            current.tokens_after = outcome.tokens_before
            current.error = f"Would free only {max(outcome.saved, 0):,} tokens; nothing changed."
            current.notes = outcome.notes
            current.finished_at = now
            current.save(
                update_fields=["upto_seq", "tokens_before", "tokens_after", "status", "error", "notes", "finished_at"]
            )
            return "skipped"
        summarized = set(outcome.summary.summarized_seqs) if outcome.summary else set()
        touched = {c.seq for c in outcome.changes} | summarized
        rows = {
            m.seq: m
            for m in Message.objects.select_for_update().filter(
                session=session, seq__in=touched, state__in=CONTEXT_STATES
            )
        }
        # The snapshot must still be what is stored (only appends can happen meanwhile, and they add seqs).
        if any(seq not in rows or rows[seq].content != snap.rows[seq][1] for seq in touched):
            raise EngineError("Messages changed while the compaction was planned.", permanent=False)
        backups, token_delta, left_context = [], 0, 0
        for change in outcome.changes:
            row = rows[change.seq]
            backups.append(_backup(current, row))
            token_delta += change.tokens_after - row.tokens
            row.content, row.tokens, row.tokens_exact = change.content, change.tokens_after, None
            row.state, row.compaction = MessageState.COMPACTED, current
        for seq in summarized:
            row = rows[seq]
            if seq not in {c.seq for c in outcome.changes}:
                backups.append(_backup(current, row))
            token_delta -= row.tokens
            left_context += 1
            row.state, row.compaction = MessageState.SUMMARIZED, current
        MessageBackup.objects.bulk_create(backups)
        Message.objects.bulk_update(list(rows.values()), ["content", "tokens", "tokens_exact", "state", "compaction"])
        if outcome.summary is not None:
            _checkpoint_create(session, current, outcome.summary)
            session.summary_tokens = outcome.summary.summary_tokens
        session.message_tokens += token_delta
        session.active_message_count -= left_context
        session.exact_upto_seq = None  # the exact count described the old content
        session.compaction_failures = 0
        if record.trigger == "manual":
            session.auto_paused = False
        session.save(
            update_fields=[
                "summary_tokens",
                "message_tokens",
                "active_message_count",
                "exact_upto_seq",
                "compaction_failures",
                "auto_paused",
                "updated_at",
            ]
        )
        current.status = CompactionStatus.SUCCEEDED
        current.items = outcome.items(snap.factor)
        current.tokens_after = outcome.tokens_after
        current.error = ""
        current.notes = outcome.notes
        current.finished_at = now
        current.revertible_until = now + timedelta(hours=policy.revert_hours)
        current.save()
    return "succeeded"


def _backup(compaction: Compaction, row: Message) -> MessageBackup:
    return MessageBackup(
        compaction=compaction,
        message=row,
        content=row.content,
        tokens=row.tokens,
        tokens_exact=row.tokens_exact,
        state=row.state,
        previous_compaction_id=row.compaction_id,
    )


def _checkpoint_create(
    session: AgentSession, compaction: Compaction, summary: SummaryPlan, *, reason: str = "compaction"
) -> Checkpoint:
    data = dict(summary.checkpoint)
    data.setdefault("summary_text", summary.summary_text)
    return Checkpoint.objects.create(
        session=session,
        version=selectors.next_checkpoint_version(session),
        data=data,
        reason=reason,
        compaction=compaction,
        upto_seq=max(summary.summarized_seqs, default=0),
        tokens=summary.summary_tokens,
        lossy=summary.lossy,
    )


def stale_requeue() -> int:
    """Re-send running compactions whose worker died (crash recovery), and queued ones nobody took —
    the broker was down when they were queued, say (beat runs this every minute). A compaction on
    its way to a retry (released, within its backoff) is left alone; one tried ``MAX_ATTEMPTS``
    times is failed, not re-sent forever."""
    now = timezone.now()
    dead = now - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 30)
    forgotten = now - timedelta(seconds=settings.CTX_REQUEUE_AFTER_SECONDS)
    candidates = Compaction.objects.filter(
        Q(status=CompactionStatus.RUNNING, started_at__lt=dead)
        | Q(status=CompactionStatus.QUEUED, started_at__isnull=True, created_at__lt=forgotten)
        | Q(status=CompactionStatus.QUEUED, started_at__lt=forgotten)
    ).values_list("pk", "attempts")
    from .tasks import run_compaction

    sent = 0
    for pk, attempts in candidates:
        if attempts >= MAX_ATTEMPTS:
            compaction_fail(pk, f"gave up after {attempts} attempts: its worker kept dying or its message was lost")
        else:
            sent += queueing.send(run_compaction, pk)
    return sent
