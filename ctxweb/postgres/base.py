"""Django's PostgreSQL backend, its health check skipped for a connection that answered a moment ago.

``CONN_HEALTH_CHECKS`` sends ``SELECT 1`` before the first statement of every request (and of every
task and recording, which close old connections as a request does): a round trip of its own in each
of an agent's appends and before each proxied request goes upstream. A connection whose last request
used it without an error, its last statement less than ``FRESH_SECONDS`` ago, is taken as it is. One
that broke in between (a server restart within that second) fails its next statement instead: the
request answers 503 (``DatabaseUnavailableMiddleware``), the proxy forwards unrecorded, a recording
or a task fails as in an outage (the reply's usage row of that exchange is then missing; its messages
come with the agent's next request), and Django drops the connection at the end, as it does for a
connection that breaks during a request."""

from __future__ import annotations

import math
import time

from django.db.backends.postgresql import base

FRESH_SECONDS = 1.0


class DatabaseWrapper(base.DatabaseWrapper):
    health_check_done: bool  # Django's (set in its __init__; the stubs don't list it)
    used_at = -math.inf  # when a cursor was last asked of the connection (each statement's, each transaction's)
    answered_at = -math.inf  # ``used_at`` as the last request that used the connection ended, without an error

    def close_if_unusable_or_obsolete(self) -> None:
        # Called as a request (task, recording) starts and ends: ``health_check_done`` says the connection
        # was used since the last call, ``errors_occurred`` that a use raised a database error. The time
        # kept is the last use, not this call's: a stream that ended a minute after its statements, or a
        # request that starts long after one that failed, vouches for nothing newer than that use.
        if self.connection is not None and self.health_check_done and not self.errors_occurred:
            self.answered_at = self.used_at
        super().close_if_unusable_or_obsolete()

    def close_if_health_check_failed(self) -> None:
        if (
            self.connection is not None
            and not self.health_check_done
            and time.monotonic() - self.answered_at < FRESH_SECONDS
        ):
            self.health_check_done = True
        else:
            super().close_if_health_check_failed()
        self.used_at = time.monotonic()
