"""Django's PostgreSQL backend, its health check skipped for a connection that answered a moment ago.

``CONN_HEALTH_CHECKS`` sends ``SELECT 1`` before the first statement of every request (and of every
task and recording, which close old connections as a request does): a round trip of its own in each
of an agent's appends and before each proxied request goes upstream. A connection that ended its
last request without an error less than ``FRESH_SECONDS`` ago is taken as it is. One that broke in
between (a server restart in that second) fails its next statement instead: the request answers
503 (``DatabaseUnavailableMiddleware``; the proxy forwards unrecorded) and Django drops the
connection at its end, as it does today for a connection that breaks during a request."""

from __future__ import annotations

import math
import time

from django.db.backends.postgresql import base

FRESH_SECONDS = 1.0


class DatabaseWrapper(base.DatabaseWrapper):
    answered_at = -math.inf  # when the connection last ended a request in which it was used, without an error

    def close_if_unusable_or_obsolete(self) -> None:
        # Called as a request (task, recording) starts and ends: the check is done once the connection
        # was used since the last call; a use that raised a database error set ``errors_occurred``.
        if self.connection is not None and self.health_check_done and not self.errors_occurred:
            self.answered_at = time.monotonic()
        super().close_if_unusable_or_obsolete()

    def close_if_health_check_failed(self) -> None:
        if self.connection is not None and time.monotonic() - self.answered_at < FRESH_SECONDS:
            self.health_check_done = True
            return
        super().close_if_health_check_failed()
