"""Celery tasks, and the steps that send work to them.

Services record work in the database first (a queued Compaction, a pending count) and never import
this module; the callers (API, pages, CLI, and the tasks themselves) send that work here once it is
recorded: ``followup_send`` after storing messages, ``compaction_send`` after requesting a compaction,
``after_policy_change`` after a policy edit.
Tasks take ids, call one service, and retry transient failures with backoff.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from celery import Task, shared_task
from django.conf import settings
from django.db import DatabaseError, transaction

from compaction.errors import EngineError, ProviderError
from sessions_app.models import AgentSession, Project
from sessions_app.selectors import usage
from sessions_app.services import (
    auto_compaction,
    compaction_records,
    compaction_runs,
    counting,
    retention,
    webhook_delivery,
)

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- sending


def send(task: Any, *args: Any, countdown: float | None = None) -> bool:
    """Queue ``task(*args)``; False (and a warning in the log) when the broker is unreachable. The
    work is already recorded, so a message that can't be sent now is sent again later: beat re-sends
    compactions queued for longer than ``CTX_REQUEUE_AFTER_SECONDS``; the next append queues a count."""
    try:
        task.apply_async(args, countdown=countdown)
    except Exception as exc:  # kombu/redis raise several kinds; none may reach the caller
        log.warning("could not queue %s%r: %s: %s", task.name, args, type(exc).__name__, exc)
        return False
    return True


def compaction_send(compaction_id: int) -> None:
    """Send a queued compaction to the workers once the caller's transaction commits."""
    transaction.on_commit(lambda: send(run_compaction, compaction_id))


def followup_send(*sessions: AgentSession | int) -> bool:
    """The step after storing messages: what they set off (``services.auto``), sent to the workers.
    True when a compaction was queued (in the embedded mode it has run already: reread the session)."""
    queued = notified = False
    for session in sessions:
        follow = auto_compaction.append_followup(session)
        notified = notified or follow.notified
        queued = queued or follow.compaction_id is not None
        if follow.compaction_id is not None:
            compaction_send(follow.compaction_id)
        if follow.count_in is not None:
            transaction.on_commit(partial(send, count_exact_tokens, follow.session_id, countdown=follow.count_in))
    if notified:  # most appends change no level: no task for them
        webhooks_send()
    return queued


def webhooks_send() -> None:
    """The step after anything that may have recorded webhook events (an append, a compaction, a
    revert, a handoff, "send test"): the due deliveries go to the workers once the caller commits.
    Beat runs the same every minute, for whatever a caller missed or a broker outage kept back."""
    transaction.on_commit(lambda: send(send_due_webhooks))


def after_policy_change(project: Project) -> None:
    """The step after a project's policy changed: its active sessions that the new numbers put over a
    threshold get a compaction now (``services.auto_compaction.project_reevaluate``), sent to the workers."""
    for compaction_id in auto_compaction.project_reevaluate(project):
        compaction_send(compaction_id)
    webhooks_send()


# ----------------------------------------------------------------------------- tasks


def _backoff(retries: int) -> float:
    """Seconds before retry number ``retries + 1``: doubling from the configured base, at most 60."""
    return min(60.0, settings.CTX_RETRY_BACKOFF_BASE * 2**retries)


@shared_task(bind=True, max_retries=4, acks_late=True, ignore_result=True)
def count_exact_tokens(self: Task, session_id: int) -> str:
    try:
        return counting.session_count_exact(session_id=session_id)
    except ProviderError as exc:
        if exc.permanent:
            return "failed"
        raise self.retry(exc=exc, countdown=_backoff(self.request.retries)) from exc


@shared_task(bind=True, max_retries=4, acks_late=True, ignore_result=True)
def run_compaction(self: Task, compaction_id: int) -> str:
    """Idempotent: a compaction that is no longer queued (done, or claimed by another worker) is left alone."""
    try:
        return compaction_runs.compaction_run(compaction_id)
    except EngineError as exc:  # transient by construction: permanent ones are recorded by the service
        compaction_records.release_for_retry(compaction_id, str(exc))
        if self.max_retries is not None and self.request.retries >= self.max_retries:  # None: retry forever
            # The model stayed unavailable: summarize offline rather than not at all (STATUS warns).
            return compaction_runs.compaction_run(compaction_id, fallback_reason=str(exc))
        raise self.retry(exc=exc, countdown=_backoff(self.request.retries)) from exc
    finally:
        _webhooks_after_run()


def _webhooks_after_run() -> None:
    """Whatever the run recorded (succeeded, failed, paused) goes out now; a run that recorded no
    delivery sends no task (before, every run sent one: a broker round trip and a task for nothing)."""
    try:
        due = webhook_delivery.any_due()
    except DatabaseError:  # can't tell now; the worker will look (and beat would anyway)
        due = True
    if due:
        webhooks_send()


@shared_task(ignore_result=True)
def requeue_stale_compactions() -> int:
    """Every minute: re-send compactions whose worker died or whose message was lost; how many were sent."""
    return sum(send(run_compaction, pk) for pk in compaction_runs.stale_compactions())


@shared_task(ignore_result=True)
def expire_compaction_backups() -> dict[str, Any]:
    """Hourly: backups no revert can use any more are purged (and logged)."""
    return retention.prune_run(parts=("backups",))


@shared_task(ignore_result=True)
def prune() -> dict[str, Any]:
    """Daily: archive inactive sessions, purge expired backups, trim context documents."""
    return retention.prune_run()


@shared_task(ignore_result=True)
def relevel_sessions() -> int:
    """Every ten minutes, and after a model profile's edit: every session's stored level and usage
    worked out again (``services.auto_compaction.sessions_relevel``); how many moved."""
    result = auto_compaction.sessions_relevel()
    with transaction.atomic():  # the sends go out once this commits, as after any other step
        for compaction_id in result.queued:
            compaction_send(compaction_id)
        webhooks_send()
    return result.moved


def after_model_profile_change() -> None:
    """The step after a model profile was added, edited or deleted: this process reads the profiles
    afresh, and the sessions' stored levels follow the new window or calibration (a worker's job)."""
    usage.forget_model_profiles()
    send(relevel_sessions)


@shared_task(ignore_result=True)
def send_due_webhooks() -> int:
    """Every minute, and after events: each due webhook delivery to a worker of its own; how many."""
    return sum(send(deliver_webhook, pk) for pk in webhook_delivery.deliveries_due())


@shared_task(ignore_result=True)
def deliver_webhook(delivery_id: int) -> str:
    """Idempotent: a delivery another worker claimed, or not due yet, is left alone. A failed attempt
    comes back after its backoff (in the embedded mode, where a countdown would run at once, beat's
    absence leaves it to the next event's send or `ctx webhooks`)."""
    outcome = webhook_delivery.delivery_attempt(delivery_id)
    if outcome.result == "retry" and not deliver_webhook.app.conf.task_always_eager:
        send(deliver_webhook, delivery_id, countdown=outcome.retry_in)
    return outcome.result
