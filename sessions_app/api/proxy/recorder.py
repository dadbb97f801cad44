"""Where the proxy records an exchange once its answer is out: a few threads per web process.

Recording a reply (the request's new messages, the reply, the exact count: ~25 queries) used to run
when the response closed, in the thread that served it. A threaded server reads an agent's next
request on a keep-alive connection only after that, so an agent that asked again at once waited for
ctxweb's writes before its request even went upstream. Here that work is queued instead, the
connection is free at once, and the caller's time to first byte holds only finding the session.

Order: an exchange's jobs run on the lane its session hashes to, one at a time, so one process
records a session's exchanges in the order they ended. Across processes the recording is ordered by
the data (``services.proxy``: a request behind what is stored adds nothing; a reply goes only right
after its request). A full lane makes the request thread wait for room (back-pressure, the order
kept), never drops a job. A process that exits gracefully records what it has queued first; one that
is killed loses the replies it had queued, which the agent's next request brings with its history.

Priority: a request on its way to its first byte goes first. The recording of an exchange and the
next request of the conversation (an agent asks again as soon as it has read the answer) run at once
in one process and take turns at the interpreter's lock; a lane therefore waits, between its
statements and outside a transaction (it holds no row lock then), while a request of its process is
on its way (``forwarding``): from arrival until it is sent upstream, and then for ``_AFTER_SENT``
seconds more, which an upstream answering at once takes; longer, the request waits for a model, which
holds nothing up. At most ``_GIVE_WAY`` seconds a job.

``CTX_PROXY_RECORDERS`` = 0 records in the request thread, as before."""

from __future__ import annotations

import atexit
import logging
import math
import os
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connections

log = logging.getLogger(__name__)

Job = Callable[[], None]
_STOP = None
_GIVE_WAY = 0.05  # seconds a job waits at most, in all, for requests ahead of it
_AFTER_SENT = 0.02  # seconds a request sent upstream still goes ahead of the lanes


class Recorder:
    """``begin(key)`` when an exchange starts, ``submit(key, job)`` when its answer is out (the job
    records it); ``idle()`` waits for every exchange begun to be recorded, ``caught_up(key)`` for the
    jobs queued for one session."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._open: Counter[int] = Counter()  # exchanges begun and not yet recorded, by session
        self._queued: Counter[int] = Counter()  # jobs submitted and not yet run, by session
        self._lanes: list[queue.Queue[tuple[int, Job] | None]] = []
        self._threads: list[threading.Thread] = []
        self._pid = 0
        # The threads of requests on their way to their first byte: when each was sent upstream (None: not yet).
        self._forwarding: dict[int, float | None] = {}
        self._lane = threading.local()  # a lane's: what is left of its job's allowance to give way

    def begin(self, key: int) -> None:
        with self._changed:
            self._open[key] += 1

    def submit(self, key: int, job: Job) -> None:
        """Run ``job`` on the session's lane (in this thread when there are no lanes)."""
        lanes = self._started()
        if not lanes:
            self._run(key, job, queued=False)
            return
        with self._changed:
            self._queued[key] += 1
        lanes[key % len(lanes)].put((key, job))  # waits while the lane is full

    @contextmanager
    def forwarding(self) -> Iterator[Callable[[], None]]:
        """Around a request's way to its first byte: the lanes give way meanwhile. What it gives says
        the request is sent upstream (the lanes then give way for ``_AFTER_SENT`` more at most)."""
        self._ahead_of_lanes(True)
        try:
            yield self._sent
        finally:
            self._ahead_of_lanes(False)

    def _ahead_of_lanes(self, ahead: bool) -> None:
        token = threading.get_ident()  # a thread serves one request at a time
        with self._changed:
            if ahead:
                self._forwarding[token] = None
            elif token in self._forwarding:
                del self._forwarding[token]
                self._changed.notify_all()

    def _sent(self) -> None:
        with self._changed:
            self._forwarding[threading.get_ident()] = time.monotonic()
            self._changed.notify_all()  # waiting lanes count the time from now

    def _ahead_for(self) -> float:
        """Seconds for which requests still go ahead of the lanes (0: none does)."""
        if any(sent is None for sent in self._forwarding.values()):
            return math.inf
        latest = max((sent for sent in self._forwarding.values() if sent is not None), default=None)
        return 0.0 if latest is None else max(0.0, latest + _AFTER_SENT - time.monotonic())

    def _give_way(self, execute: Any, sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
        """A lane's statements (``connection.execute_wrapper``): outside a transaction, each waits
        while a request goes ahead, within the job's allowance."""
        if self._forwarding and not context["connection"].in_atomic_block:
            with self._changed:
                while self._lane.allowance > 0 and (ahead := self._ahead_for()) > 0:
                    started = time.monotonic()
                    self._changed.wait(min(ahead, self._lane.allowance))
                    self._lane.allowance -= time.monotonic() - started
        return execute(sql, params, many, context)

    def idle(self, timeout: float = 30.0) -> bool:
        """Every exchange begun is recorded (tests; a graceful exit)."""
        with self._changed:
            return self._changed.wait_for(lambda: not +self._open, timeout)

    def caught_up(self, key: int, timeout: float = 5.0) -> bool:
        """The exchanges of session ``key`` that ended are recorded: before a request is recorded
        ahead of its forwarding, the reply and usage of the one before it are in."""
        ahead = threading.get_ident() in self._forwarding
        if ahead:  # a request waiting for the lanes doesn't hold them back meanwhile
            self._ahead_of_lanes(False)
        try:
            with self._changed:
                return self._changed.wait_for(lambda: not self._queued[key], timeout)
        finally:
            if ahead:
                self._ahead_of_lanes(True)

    def _started(self) -> list[queue.Queue[tuple[int, Job] | None]]:
        count = settings.CTX_PROXY_RECORDERS
        if count <= 0:
            return []
        with self._changed:
            if self._pid != os.getpid():  # first use in this process (a forked worker starts its own)
                self._pid = os.getpid()
                self._lanes = [queue.Queue(maxsize=settings.CTX_PROXY_RECORD_QUEUE) for _ in range(count)]
                self._threads = [
                    threading.Thread(target=self._work, args=(lane,), name=f"ctxweb-proxy-recorder-{i}", daemon=True)
                    for i, lane in enumerate(self._lanes)
                ]
                for thread in self._threads:
                    thread.start()
                atexit.register(self.stop)
            return self._lanes

    def _work(self, lane: queue.Queue[tuple[int, Job] | None]) -> None:
        # A lane keeps its connection between jobs as a request thread does (an agent's turns come
        # seconds apart: a connection a turn cost Postgres a backend each); one idle for
        # CONN_MAX_AGE gives it back, and with CONN_MAX_AGE 0 none is kept.
        keep = settings.DATABASES["default"].get("CONN_MAX_AGE", 0)
        while True:
            try:
                item = lane.get(timeout=keep) if keep != 0 else lane.get()
            except queue.Empty:
                connections.close_all()
                item = lane.get()
            if item is _STOP:
                break
            key, job = item
            self._run(key, job, queued=True)
            if keep == 0 and lane.empty():
                connections.close_all()
        connections.close_all()

    def _run(self, key: int, job: Job, *, queued: bool) -> None:
        if queued:  # in a lane, as around a request: a connection broken or past its age is replaced
            close_old_connections()
        try:
            if queued:
                self._lane.allowance = _GIVE_WAY
                with connections["default"].execute_wrapper(self._give_way):
                    job()
                close_old_connections()  # and after it, as at a request's end (ctxweb/postgres keeps when it answered)
            else:
                job()
        except Exception:  # a job logs its own failures; this keeps the lane alive whatever it does
            log.exception("proxy: an exchange was not recorded")
        finally:
            with self._changed:
                self._queued[key] -= queued
                self._open[key] -= 1
                for counts in (self._queued, self._open):
                    if counts[key] <= 0:
                        del counts[key]
                self._changed.notify_all()

    def stop(self, timeout: float = 20.0) -> None:
        """Record what is queued, then end the lanes (at exit)."""
        deadline = time.monotonic() + timeout
        for lane in self._lanes:
            lane.put(_STOP)
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self._changed:
            self._pid, self._lanes, self._threads = 0, [], []  # a later job starts new lanes


RECORDER = Recorder()
