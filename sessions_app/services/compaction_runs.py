"""Compaction lifecycle: queue one per session, claim it in a worker, plan outside any transaction,
apply in one transaction to exactly the planned messages, fail without changing anything.

The engine (``compaction.reversible`` / ``compaction.summarize``) works on a snapshot; this module is the
only place that turns its plans into rows. Token figures in Compaction records and their items are
calibrated (the same units as STATUS); message rows keep raw offline counts.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from compaction.errors import EngineError
from compaction.summarize import SummaryPlan
from compaction.types import Level
from sessions_app import metrics
from sessions_app.engine import offline_summarizer
from sessions_app.errors import Conflict
from sessions_app.models import (
    BULK_UPDATE_BATCH,
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
from sessions_app.selectors import model_context, usage
from sessions_app.services import redaction, spend_rollup, webhook_events
from sessions_app.services.compaction_records import (
    MAX_ATTEMPTS,
    LostClaim,
    SessionClosed,
    claim,
    compaction_fail,
    compaction_skip_closed,
    lock_running,
)
from sessions_app.services.handoffs import handoff_auto_document, handoff_from_compaction
from sessions_app.services.planning import Outcome, Snapshot, plan, snapshot
from sessions_app.services.stepping_up import above_target, compaction_step_up

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # AUTH_USER_MODEL

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- requests


def compaction_request(
    *,
    session: AgentSession,
    level: str,
    user: User | None,
    instructions: str = "",
    trigger: str = "manual",
) -> Compaction:
    """Queue a compaction; the worker picks it up once this transaction commits. One at a time per
    session: the database's partial unique constraint refuses a second queued or running one."""
    if session.status != SessionStatus.ACTIVE:
        raise Conflict(f"Session {session.pk} is {session.status.replace('_', ' ')}.", code="session_closed")
    try:
        with transaction.atomic():
            record = Compaction.objects.create(
                session=session,
                project_id=session.project_id,
                level=level,
                trigger=trigger,
                requested_by=user if user is not None and user.is_authenticated else None,
                # Stored, and read by the summarizer: what the session holds is redacted, so are they.
                instructions=redaction.value_redact(session.project, instructions).value if instructions else "",
            )
    except IntegrityError:
        raise Conflict(
            "A compaction of this session is already queued or running; wait for it to finish.",
            code="compaction_in_progress",
        ) from None
    return record


def compaction_retry(*, session: AgentSession, user: User | None) -> Compaction:
    """Try again what failed (the dashboard's Retry): the level of the session's newest failed
    compaction, else the one its usage calls for (at least ``compact``), queued as a manual run by
    ``user``. It succeeding lifts an automatic-compaction pause, like any manual run that succeeds."""
    failed = session.compactions.filter(status=CompactionStatus.FAILED).order_by("-pk").first()
    if failed is not None:
        level = failed.level
    else:
        current = usage.session_usage(session).level.value
        level = current if current in ("compact", "summarize", "handoff") else "compact"
    return compaction_request(session=session, level=level, user=user)


# ----------------------------------------------------------------------------- running


def compaction_run(compaction_id: int, *, fallback_reason: str = "") -> str:
    """Claim, plan outside any transaction, apply; one log line says what the run did. Transient
    engine errors propagate (the task retries them); anything else marks the compaction failed and
    changes no message. ``fallback_reason``: the model kept failing, so the offline summarizer
    stands in (and says so)."""
    if not claim(compaction_id):
        return "not-claimed"
    started = time.monotonic()
    record = Compaction.objects.select_related("session", "session__project", "session__project__policy").get(
        pk=compaction_id
    )
    result = _run(record, fallback_reason)
    done = Compaction.objects.filter(pk=compaction_id).values("tokens_before", "tokens_after", "session_id").first()
    before, after = (done["tokens_before"], done["tokens_after"]) if done else (None, None)
    seconds = time.monotonic() - started
    if result != "lost-claim":  # another worker owns the record now and reports it
        metrics.compaction_finished(level=record.level, outcome=result, seconds=seconds)
    log.info(
        "compaction %s of session %s: level=%s trigger=%s result=%s tokens %s -> %s in %.2f s",
        compaction_id,
        record.session_id,
        record.level,
        record.trigger,
        result,
        before,
        after,
        seconds,
        extra={
            "event": "compaction",
            "compaction": compaction_id,
            "session": record.session_id,
            "compaction_level": record.level,
            "trigger": record.trigger,
            "result": result,
            "tokens_before": before,
            "tokens_after": after,
            "saved_tokens": before - after if before is not None and after is not None else None,
            "duration_ms": round(seconds * 1000, 1),
        },
    )
    return result


def _run(record: Compaction, fallback_reason: str) -> str:
    session = record.session
    auto_handoff = record.level == Level.HANDOFF.value and record.trigger == "auto"
    manual_handoff = record.level == Level.HANDOFF.value and record.trigger == "manual"
    try:
        snap = snapshot(session)
        summarizer = offline_summarizer(snap.policy) if fallback_reason else None
        continuing = auto_handoff and snap.policy.auto_continue
        outcome = plan(
            snap,
            # A handoff document is a summary of everything of its own; it only needs the sizes here.
            Level.COMPACT.value if manual_handoff or continuing else record.level,
            summarizer=summarizer,
            instructions=record.instructions,
            force=record.trigger == "manual" or continuing,
        )
        if fallback_reason and outcome.summary is not None:
            outcome.notes.append(f"{FALLBACK_NOTE} ({fallback_reason}); the offline extractive summary was used.")
    except Exception as exc:
        return _failed(record.pk, exc, "planning")
    try:
        if manual_handoff or continuing:
            # brainchain's step at the top: the whole session into a handoff, continued in a fresh one.
            result = handoff_from_compaction(
                record, snap, outcome, continue_=continuing, allow_fallback=bool(fallback_reason)
            )
            if result != "too-large":
                return result
            # The fresh session would start at its own compact threshold: compact this one instead.
            outcome = plan(snap, record.level, summarizer=summarizer, instructions=record.instructions)
            outcome.notes.append(
                "Not continued: the system prompt, tools and handoff would fill the fresh session past its "
                "compact threshold; compacted here instead."
            )
        result = apply(record, snap, outcome)
        if auto_handoff and result in ("succeeded", "skipped"):
            # The document lets the agent start afresh; a run still above its target says why.
            document = handoff_auto_document(record)
            if above_target(record, snap):
                compaction_step_up(record, snap, document=document)
            return "succeeded"
        if record.trigger == "auto" and above_target(record, snap):
            compaction_step_up(record, snap)  # the window can't hold what must stay under the target
            return "succeeded"
        return result
    except LostClaim:
        return "lost-claim"
    except SessionClosed:
        compaction_skip_closed(record.pk)
        return "skipped"
    except Exception as exc:
        return _failed(record.pk, exc, "applying")


def _failed(compaction_id: int, exc: Exception, stage: str) -> str:
    """Called while handling ``exc``: a permanent engine error, or a bug (which must not leave the
    record running forever), fails the compaction; no message was changed. A transient engine error
    propagates: the task retries it."""
    if isinstance(exc, EngineError):
        metrics.summarizer_error(permanent=exc.permanent)
        if not exc.permanent:
            raise exc
        compaction_fail(compaction_id, str(exc))
    else:
        log.exception("compaction %s crashed while %s", compaction_id, stage)
        compaction_fail(compaction_id, f"internal error: {type(exc).__name__}")
    return "failed"


def apply(record: Compaction, snap: Snapshot, outcome: Outcome) -> str:
    """Write the plan in one transaction, to exactly the planned messages as they were planned."""
    policy = snap.policy
    now = timezone.now()
    with transaction.atomic():
        session, current = lock_running(record)
        current.upto_seq = snap.upto_seq
        current.tokens_before = outcome.tokens_before
        if (outcome.saved < policy.min_saving(snap.window) and record.trigger == "auto") or outcome.saved <= 0:
            current.status = CompactionStatus.SKIPPED
            current.tokens_after = outcome.tokens_before
            current.error = f"Would free only {max(outcome.saved, 0):,} tokens; nothing changed."
            current.notes = outcome.notes
            current.finished_at = now
            current.save(
                update_fields=["upto_seq", "tokens_before", "tokens_after", "status", "error", "notes", "finished_at"]
            )
            return "skipped"
        token_delta, left_context = _rewrite_messages(session, current, snap, outcome)
        if outcome.summary is not None:
            _checkpoint_create(session, current, outcome.summary)
            session.summary_tokens = outcome.summary.summary_tokens
        _session_totals(session, token_delta=token_delta, left_context=left_context, manual=record.trigger == "manual")
        current.status = CompactionStatus.SUCCEEDED
        current.items = outcome.items(snap.factor)
        current.tokens_after = outcome.tokens_after
        current.error = ""
        current.notes = outcome.notes
        current.finished_at = now
        current.revertible_until = now + timedelta(hours=policy.revert_hours)
        current.save()
        spend_rollup.session_savings_refresh(session.pk)
        webhook_events.compaction_succeeded(session, current)
    return "succeeded"


def _rewrite_messages(session: AgentSession, current: Compaction, snap: Snapshot, outcome: Outcome) -> tuple[int, int]:
    """Back up and change the planned messages; (raw token change, messages that left the context)."""
    summarized = set(outcome.summary.summarized_seqs) if outcome.summary else set()
    changed = {c.seq for c in outcome.changes}
    touched = changed | summarized
    rows = {
        m.seq: m
        for m in Message.objects.select_for_update().filter(session=session, seq__in=touched, state__in=CONTEXT_STATES)
    }
    # The snapshot must still be what is stored (only appends can happen meanwhile, and they add seqs).
    if any(seq not in rows or rows[seq].content != snap.rows[seq][1] for seq in touched):
        raise EngineError("Messages changed while the compaction was planned.", permanent=False)
    backups, token_delta = [], 0
    for change in outcome.changes:
        row = rows[change.seq]
        backups.append(MessageBackup.of(current, row))
        token_delta += change.tokens_after - row.tokens
        row.content, row.tokens, row.tokens_exact = change.content, change.tokens_after, None
        row.state, row.compaction = MessageState.COMPACTED, current
    for seq in summarized:
        row = rows[seq]
        if seq not in changed:
            backups.append(MessageBackup.of(current, row))
        token_delta -= row.tokens
        row.state, row.compaction = MessageState.SUMMARIZED, current
    MessageBackup.objects.bulk_create(backups)
    rewritten = [rows[seq] for seq in sorted(changed)]
    Message.objects.bulk_update(
        rewritten, ["content", "tokens", "tokens_exact", "state", "compaction"], batch_size=BULK_UPDATE_BATCH
    )
    # The others only leave the context, all alike: their content is not sent back (a CASE per row).
    left = sorted(rows[seq].pk for seq in summarized - changed)
    for start in range(0, len(left), BULK_UPDATE_BATCH):
        chunk = left[start : start + BULK_UPDATE_BATCH]
        Message.objects.filter(pk__in=chunk).update(state=MessageState.SUMMARIZED, compaction=current)
    return token_delta, len(summarized)


def _session_totals(session: AgentSession, *, token_delta: int, left_context: int, manual: bool) -> None:
    session.message_tokens += token_delta
    session.active_message_count -= left_context
    session.exact_upto_seq = None  # the exact count described the old content
    session.compaction_failures = 0
    if manual:
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


def _checkpoint_create(
    session: AgentSession, compaction: Compaction, summary: SummaryPlan, *, reason: str = "compaction"
) -> Checkpoint:
    data = dict(summary.checkpoint)
    data.setdefault("summary_text", summary.summary_text)
    return Checkpoint.objects.create(
        session=session,
        version=model_context.next_checkpoint_version(session),
        data=data,
        reason=reason,
        compaction=compaction,
        upto_seq=max(summary.summarized_seqs, default=0),
        tokens=summary.summary_tokens,
        lossy=summary.lossy,
    )


def stale_compactions() -> list[int]:
    """Compactions to send to the workers again: running ones whose worker died (crash recovery),
    and queued ones nobody took — the broker was down when they were queued, say (beat runs
    ``tasks.requeue_stale_compactions`` every minute). A compaction on its way to a retry (released,
    within its backoff) is left alone; one tried ``MAX_ATTEMPTS`` times is failed here, not re-sent
    forever."""
    now = timezone.now()
    dead = now - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 30)
    forgotten = now - timedelta(seconds=settings.CTX_REQUEUE_AFTER_SECONDS)
    candidates = Compaction.objects.filter(
        Q(status=CompactionStatus.RUNNING, started_at__lt=dead)
        | Q(status=CompactionStatus.QUEUED, started_at__isnull=True, created_at__lt=forgotten)
        | Q(status=CompactionStatus.QUEUED, started_at__lt=forgotten)
    ).values_list("pk", "attempts")
    resend = []
    for pk, attempts in candidates:
        if attempts >= MAX_ATTEMPTS:
            compaction_fail(pk, f"gave up after {attempts} attempts: its worker kept dying or its message was lost")
        else:
            resend.append(pk)
    return resend
