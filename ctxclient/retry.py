"""Retrying transient failures inside one time budget: ``Client(..., retry=Retry.within(8))``.

Transient: no answer at all (refused, reset, timed out), 429, and 500/502/503/504. A ``Retry-After``
(seconds or an HTTP date; ``retry-after-ms`` first when both come) sets the wait, otherwise exponential
backoff with jitter does. Nothing sleeps past the deadline: a wait that would end too late gives up at
once and the last error is raised as it came. Only opt in for requests that are safe to send twice.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timezone
from typing import Protocol

from .errors import ApiError, CtxError, DeadlineExceeded, Unreachable

__all__ = ["RETRY_STATUSES", "Retry", "retry_after_seconds"]

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True)
class Retry:
    """When to try again and how long to wait; one ``deadline`` (``time.monotonic()``) for every request
    of the client that holds it, so a whole run of calls stays inside one budget."""

    deadline: float
    base_delay: float = 0.5  # the first backoff; doubles per retry of the same request
    max_delay: float = 4.0
    min_attempt: float = 0.25  # an attempt with less time than this left is not worth starting
    statuses: frozenset[int] = RETRY_STATUSES
    notify: Callable[[str], None] | None = None  # told about each retry and each giving up

    @classmethod
    def within(cls, seconds: float, *, notify: Callable[[str], None] | None = None) -> Retry:
        """A policy whose budget starts now."""
        return cls(deadline=time.monotonic() + seconds, notify=notify)

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def retries(self, error: CtxError) -> bool:
        if isinstance(error, DeadlineExceeded):
            return False
        if isinstance(error, Unreachable):  # no status: the connection failed or timed out
            return error.status is None or error.status in self.statuses
        return isinstance(error, ApiError) and error.status in self.statuses

    def wait(self, error: CtxError, retry: int) -> float:
        """Seconds before retry number ``retry`` (0 for the first): what the server asked for, else backoff
        between half and all of ``base_delay * 2**retry`` (jitter, so clients that failed together spread out)."""
        if error.retry_after:  # 0 would mean "at once": back off instead
            return error.retry_after
        ceiling = min(self.max_delay, self.base_delay * 2**retry)
        return random.uniform(ceiling / 2, ceiling)

    def note(self, message: str) -> None:
        if self.notify is not None:
            self.notify(message)


class Headers(Protocol):
    """A response's headers as read here: ``http.client.HTTPMessage`` and a plain dict both fit."""

    def get(self, name: str, /) -> str | None: ...


def retry_after_seconds(headers: Headers | None, now: float | None = None) -> float | None:
    """The wait a response asks for: ``retry-after-ms``, or ``Retry-After`` in seconds or as an HTTP date."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = (headers.get("Retry-After") or "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):  # 3.8 raises TypeError on garbage, 3.10+ ValueError
        return None
    if when is None:
        return None
    if when.tzinfo is None:  # "-0000": UTC by the RFC
        when = when.replace(tzinfo=timezone.utc)  # noqa: UP017 (datetime.UTC is 3.11+; this runs on 3.8)
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)
