"""Celery tasks: take ids, call one service, retry transient failures with backoff."""

from __future__ import annotations

from celery import shared_task

from compaction.errors import ProviderError

from . import counting


def _backoff(retries: int) -> int:
    return min(60, 2 ** (retries + 1))


@shared_task(bind=True, max_retries=4, acks_late=True, ignore_result=True)
def count_exact_tokens(self, session_id: int) -> str:
    try:
        return counting.session_count_exact(session_id=session_id)
    except ProviderError as exc:
        if exc.permanent:
            return "failed"
        raise self.retry(exc=exc, countdown=_backoff(self.request.retries)) from exc
