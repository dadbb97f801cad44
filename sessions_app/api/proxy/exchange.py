"""One proxied exchange on its way: what it leaves to record once the answer is there (``Exchange``),
what its row of ``ProviderRequest`` holds besides the answer (``Meter``), and an answer relayed to
the caller as it arrives, a copy kept for the recording (``Relay``)."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any, NamedTuple

import httpx2
from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from compaction.http_deadline import Deadline
from sessions_app import steps
from sessions_app.api.proxy import limits as proxy_limits
from sessions_app.api.proxy.dialects import Dialect
from sessions_app.api.proxy.recorder import RECORDER
from sessions_app.models import AgentSession
from sessions_app.services.provider_requests import Answered
from sessions_app.services.provider_usage import Used
from sessions_app.services.proxy import gaps as proxy_gaps

log = logging.getLogger(__name__)


class Answer(NamedTuple):
    """An answer as read for the recording: the model's message, if it is one; whether it came whole;
    what the upstream said its model used (None: it said nothing, as an error does)."""

    message: dict[str, Any] | None
    complete: bool
    used: Used | None


NO_ANSWER = Answer(None, True, None)


@dataclass
class Meter:
    """Made when the request reaches the proxy (its arrival, on the wall clock and ``time.monotonic``);
    the view fills in who sent it and what ctxweb sent in the agent's history's place, and stamps the
    upstream's first byte (its status line) and last. ``answered`` is the exchange's row."""

    model: str = ""  # the request's
    user_id: int | None = None
    api_key_id: int | None = None
    compacted_id: int | None = None
    first_byte: float | None = None
    last_byte: float | None = None
    key: uuid.UUID = field(default_factory=uuid.uuid4)
    arrived_at: datetime = field(default_factory=timezone.now)
    started: float = field(default_factory=time.monotonic)

    def answered(self, status: int, used: Used | None) -> Answered:
        return Answered(
            key=self.key,
            arrived_at=self.arrived_at,
            status=status,
            model=self.model,
            used=used,
            user_id=self.user_id,
            api_key_id=self.api_key_id,
            ttfb_ms=self._ms(self.first_byte),
            duration_ms=self._ms(self.last_byte),
            compacted_id=self.compacted_id,
        )

    def _ms(self, at: float | None) -> float | None:
        return None if at is None else round((at - self.started) * 1000, 3)


@dataclass
class Exchange:
    """What a request leaves to record once its answer is there: the request's messages, when they
    were not recorded before it was forwarded, and the reply, right after them. Recorded on the
    session's lane of the process's recorder (``proxy_recorder``), so the connection is free at once."""

    session_id: int
    after_seq: int  # the request's last message: the reply goes right after it
    pending: dict[str, Any] | None = None  # the request's body, when its messages wait to be recorded
    session: AgentSession | None = None  # when the request may go upstream as its compacted context
    conversation: str = ""  # the conversation's key (the session's external id, unless it moved on since)
    gap: str = ""  # where the conversation's requests forwarded unrecorded are counted
    keeps_reply: bool = True  # False: the answer is no turn of the conversation (a client compacting it)
    meter: Meter | None = None  # set by the view: the request's row is written when an answer came
    finished: bool = False

    def __post_init__(self) -> None:
        RECORDER.begin(self.session_id)

    def finish(self, read: Callable[[], Answer] | None, status: int | None = None) -> None:
        """Record the exchange (in the recorder); ``read`` reads the answer (``Answer``), ``status`` is
        the upstream's (None: no answer came, and the request has no row)."""
        if self.finished:
            return
        self.finished = True
        RECORDER.submit(self.session_id, partial(self._record, read, status))

    def ended(self) -> None:
        """The upstream's last byte came."""
        if self.meter is not None:
            self.meter.last_byte = time.monotonic()

    def _record(self, read: Callable[[], Answer] | None, status: int | None) -> None:
        try:
            answer = read() if read is not None else NO_ANSWER
            meter = self.meter
            steps.proxy_exchange_record(
                session_id=self.session_id,
                after_seq=self.after_seq,
                pending=self.pending,
                message=answer.message if self.keeps_reply else None,
                complete=answer.complete,
                key=self.conversation,
                gap=self.gap,
                answered=meter.answered(status, answer.used) if meter is not None and status is not None else None,
            )
        except DatabaseError as exc:  # the caller has its answer already; the next request brings it all
            log.warning("proxy: session %s: not recorded: %s", self.session_id, type(exc).__name__)
            proxy_gaps.proxy_gap_note(self.gap)
        except Exception:  # a bug here must not cut the caller's stream short
            log.exception("proxy: session %s: not recorded", self.session_id)


class Relay:
    """The upstream's stream, passed on as it arrives, a copy kept on its way through. What there is
    to record is recorded when the response is closed: after its last byte went out (the server
    closes it then, so the caller does not wait for ctxweb's writes), or when the caller went away
    (the reply cut short). The copy is read there too, in the recorder, not between the events."""

    READ_AHEAD = 1024 * 1024  # a stream longer than this is read as it passes (memory stays bounded)

    def __init__(
        self,
        answer: httpx2.Response,
        exchange: Exchange | None,
        dialect: Dialect,
        deadline: Deadline,
        whole: Iterator[bytes] | None = None,
    ) -> None:
        """``whole``: a whole answer too large to hold, relayed (its reply is recorded as a note); else
        a stream, whose content is kept up to ``CTX_PROXY_RECORD_MAX_BYTES``."""
        self.answer, self.exchange, self.dialect, self.deadline = answer, exchange, dialect, deadline
        self.whole = whole
        self.seen = dialect.accumulator(settings.CTX_PROXY_RECORD_MAX_BYTES)
        self.kept: list[bytes] = []
        self.kept_bytes = 0

    def __iter__(self) -> Iterator[bytes]:
        try:
            for chunk in self.whole if self.whole is not None else self.answer.iter_raw():
                if self.exchange is not None and self.whole is None:
                    self.kept.append(chunk)
                    self.kept_bytes += len(chunk)
                    if self.kept_bytes > self.READ_AHEAD:
                        self._read_kept()
                yield chunk
            if self.exchange is not None:
                self.exchange.ended()
        except httpx2.RequestError as exc:
            if self.exchange is not None:
                self.exchange.ended()
            # The upstream's stream broke off: the caller is told as the API tells a failure mid-stream
            # (an error event), whichever server runs ctxweb (one may end a broken response as if whole).
            log.warning("proxy: the upstream's stream broke off: %s", type(exc).__name__)
            why = type(exc).__name__
            if self.deadline.passed:
                why = f"it did not end within CTX_PROXY_TIMEOUT, {self.deadline.seconds:g} s"
            yield self.dialect.broke_off(why)

    def _read_kept(self) -> None:
        self.seen.feed(b"".join(self.kept))
        self.kept, self.kept_bytes = [], 0

    def _reply(self) -> Answer:
        answered = self.answer.status_code == 200
        if self.whole is not None:  # its usage is past what was held: the row counts no tokens
            return Answer(*proxy_limits.too_large_reply(), None) if answered else NO_ANSWER
        self._read_kept()
        reply = self.seen.message if self.seen.message and answered else None
        if reply is not None and self.seen.truncated:
            reply = proxy_limits.truncated(reply)
        used = self.dialect.used_of(self.seen.raw) if answered else None
        return Answer(reply, self.seen.complete and self.seen.error is None, used)

    def close(self) -> None:
        self.deadline.stop()  # before the connection goes back to the pool
        self.answer.close()
        if self.exchange is not None:
            self.exchange.finish(self._reply, self.answer.status_code)
