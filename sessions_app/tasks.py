"""Celery tasks: take ids, call one service, retry transient failures with backoff."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from compaction.errors import EngineError, ProviderError

from . import compacting, counting, pruning


def _backoff(retries: int) -> float:
    """Seconds before retry number ``retries + 1``: doubling from the configured base, at most 60."""
    return min(60.0, settings.CTX_RETRY_BACKOFF_BASE * 2**retries)


@shared_task(bind=True, max_retries=4, acks_late=True, ignore_result=True)
def count_exact_tokens(self, session_id: int) -> str:
    try:
        return counting.session_count_exact(session_id=session_id)
    except ProviderError as exc:
        if exc.permanent:
            return "failed"
        raise self.retry(exc=exc, countdown=_backoff(self.request.retries)) from exc


@shared_task(bind=True, max_retries=4, acks_late=True, ignore_result=True)
def run_compaction(self, compaction_id: int) -> str:
    """Idempotent: a compaction that is no longer queued (done, or claimed by another worker) is left alone."""
    try:
        return compacting.compaction_run(compaction_id)
    except EngineError as exc:  # transient by construction: permanent ones are recorded by the service
        compacting.release_for_retry(compaction_id, str(exc))
        if self.request.retries >= self.max_retries:
            # The model stayed unavailable: summarize offline rather than not at all (STATUS warns).
            return compacting.compaction_run(compaction_id, fallback_reason=str(exc))
        raise self.retry(exc=exc, countdown=_backoff(self.request.retries)) from exc


@shared_task(ignore_result=True)
def requeue_stale_compactions() -> int:
    return compacting.stale_requeue()


@shared_task(ignore_result=True)
def expire_compaction_backups() -> dict:
    """Hourly: backups no revert can use any more are purged (and logged)."""
    return pruning.prune_run(parts=("backups",))


@shared_task(ignore_result=True)
def prune() -> dict:
    """Daily: archive inactive sessions, purge expired backups, trim context documents."""
    return pruning.prune_run()
