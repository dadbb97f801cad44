"""Sending tasks to the broker without letting a broker outage fail the request that sends them.

The work itself is recorded in the database first (a queued Compaction, a stale exact count), so a
message that can't be sent now is sent again later: beat's ``requeue_stale_compactions`` re-sends
compactions queued for longer than ``CTX_REQUEUE_AFTER_SECONDS``; the next append queues a count.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


def send(task: Any, *args: Any, countdown: float | None = None) -> bool:
    """Queue ``task(*args)``; False (and a warning in the log) when the broker is unreachable."""
    try:
        task.apply_async(args, countdown=countdown)
    except Exception as exc:  # kombu/redis raise several kinds; none may reach the caller
        log.warning("could not queue %s%r: %s: %s", task.name, args, type(exc).__name__, exc)
        return False
    return True
