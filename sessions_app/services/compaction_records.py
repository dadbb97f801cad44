"""A compaction record's claim on the work: taken by one worker with a conditional UPDATE, released
for a retry, failed (pausing automatic compaction after repeated failures), and locked with its
session before anything is written. Shared by the runs (``compaction_runs``) and the handoff level."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from sessions_app.models import (
    ACTIVE_COMPACTION_STATUSES,
    AgentSession,
    Compaction,
    CompactionStatus,
    SessionStatus,
)
from sessions_app.services import webhook_events

# Three failures in a row pause automatic compaction for a session until a manual one succeeds.
MAX_FAILURES = 3


# A compaction whose worker keeps dying (or whose message keeps getting lost) is failed after this.
MAX_ATTEMPTS = 8


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


def compaction_fail(compaction_id: int, error: str) -> None:
    with transaction.atomic():
        record = Compaction.objects.select_for_update().get(pk=compaction_id)
        if record.status not in ACTIVE_COMPACTION_STATUSES:
            return
        session = AgentSession.objects.select_for_update().get(pk=record.session_id)
        record.status = CompactionStatus.FAILED
        record.error = error[:2000]
        record.finished_at = timezone.now()
        record.save(update_fields=["status", "error", "finished_at"])
        session.compaction_failures += 1
        paused_now = session.compaction_failures >= MAX_FAILURES and not session.auto_paused
        if session.compaction_failures >= MAX_FAILURES:
            session.auto_paused = True
        session.save(update_fields=["compaction_failures", "auto_paused", "updated_at"])
        webhook_events.compaction_failed(session, record, paused_now=paused_now)


class LostClaim(Exception):
    """The record is no longer running: another worker reclaimed it after this one looked dead, so
    this one writes nothing."""


class SessionClosed(Exception):
    """The session was handed off or archived while the run planned: it writes nothing."""


def lock_running(record: Compaction) -> tuple[AgentSession, Compaction]:
    """Inside a transaction: the session and the record, locked, before a run's result is written.
    Raises ``LostClaim`` when the record is no longer running, ``SessionClosed`` when the session no
    longer takes messages (a person continued it meanwhile, say: one continuation, not two)."""
    session = AgentSession.objects.select_for_update().get(pk=record.session_id)
    current = Compaction.objects.select_for_update().get(pk=record.pk)
    if current.status != CompactionStatus.RUNNING:
        raise LostClaim(f"compaction {record.pk} is {current.status}")
    if session.status != SessionStatus.ACTIVE:
        raise SessionClosed(f"session {session.pk} is {session.status}")
    return session, current


def compaction_skip_closed(compaction_id: int) -> None:
    """A running compaction whose session was closed meanwhile: skipped, nothing changed."""
    Compaction.objects.filter(pk=compaction_id, status=CompactionStatus.RUNNING).update(
        status=CompactionStatus.SKIPPED,
        error="The session was closed (handed off or archived) while this ran; nothing changed.",
        finished_at=timezone.now(),
    )
