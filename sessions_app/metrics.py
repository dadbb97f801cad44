"""Counters and histograms for Prometheus (``/metrics``, docs/OPERATIONS.md), shared by every process.

Web processes and Celery workers are separate processes (often on separate hosts), so what they
record goes to Redis, added to the fields of one hash that a scrape reads whole. An event of every
request (an append, a STATUS) is added up in the process first and sent, with whatever else came
meanwhile, in one pipelined round trip at most ``FLUSH_SECONDS`` later (a process that scrapes sends
its own first; one killed outright loses that much); the rarer ones go at once. The embedded mode (no
Redis, one process) keeps them in memory. Recording never fails its caller: if Redis is away, the
events are dropped and the log says so once.
"""

from __future__ import annotations

import atexit
import bisect
import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence

from django.conf import settings

from ctxweb.cache import redis_client as _redis

log = logging.getLogger(__name__)

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
COMPACTION_BUCKETS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
BUCKETS = {
    "ctxweb_append_duration_seconds": LATENCY_BUCKETS,
    "ctxweb_status_duration_seconds": LATENCY_BUCKETS,
    "ctxweb_compaction_duration_seconds": COMPACTION_BUCKETS,
}

_local: dict[str, float] = {}
_lock = threading.Lock()
_warned = False
FLUSH_SECONDS = 0.5  # how long a request's events wait in their process to go with others
_pending: dict[str, float] = {}  # this process's events not sent yet (guarded by ``_lock``)
_due = threading.Event()  # set when events are pending: the sender wakes, waits FLUSH_SECONDS, sends
_sender_pid = 0  # the process whose sender thread runs (a forked child starts its own)


# ----------------------------------------------------------------------------- recording


def messages_appended(*, messages: int, tokens: int, seconds: float) -> None:
    _add(
        {
            _key("ctxweb_messages_appended_total"): messages,
            _key("ctxweb_tokens_ingested_total"): tokens,
            **_observation("ctxweb_append_duration_seconds", {}, seconds),
        },
        soon=True,
    )


def status_served(*, seconds: float) -> None:
    _add(_observation("ctxweb_status_duration_seconds", {}, seconds), soon=True)


def compaction_finished(*, level: str, outcome: str, seconds: float) -> None:
    _add(
        {
            _key("ctxweb_compactions_total", {"level": level, "outcome": outcome}): 1,
            **_observation("ctxweb_compaction_duration_seconds", {"level": level}, seconds),
        }
    )


def summarizer_error(*, permanent: bool) -> None:
    _add({_key("ctxweb_summarizer_errors_total", {"kind": "permanent" if permanent else "transient"}): 1})


def webhook_attempted(*, outcome: str) -> None:
    _add({_key("ctxweb_webhook_attempts_total", {"outcome": outcome}): 1})


# ----------------------------------------------------------------------------- reading


def recorded() -> dict[str, float]:
    """Every recorded series: ``name|labels|part`` → value (see ``_key``)."""
    client = _redis()
    if client is None:
        with _lock:
            return dict(_local)
    flush()
    raw = client.hgetall(_hash_key())
    return {k.decode(): float(v) for k, v in raw.items()}


def parse_key(key: str) -> tuple[str, dict[str, str], str]:
    name, labels, part = key.split("|")
    return name, dict(pair.split("=", 1) for pair in labels.split(",") if pair), part


def reset() -> None:
    """Forget everything recorded (tests)."""
    client = _redis()
    with _lock:
        _local.clear()
        _pending.clear()
    if client is not None:
        client.delete(_hash_key())


# ----------------------------------------------------------------------------- storage


def _key(name: str, labels: Mapping[str, str] | None = None, part: str = "") -> str:
    # Label values here are our own names (levels, outcomes): no "|", "," or "=" in them.
    return f"{name}|{','.join(f'{k}={v}' for k, v in sorted((labels or {}).items()))}|{part}"


def _observation(name: str, labels: Mapping[str, str], seconds: float) -> dict[str, float]:
    buckets: Sequence[float] = BUCKETS[name]
    index = bisect.bisect_left(buckets, seconds)
    upper = "+Inf" if index == len(buckets) else repr(buckets[index])
    return {
        _key(name, labels, f"bucket:{upper}"): 1,  # non-cumulative here; the scrape adds them up
        _key(name, labels, "count"): 1,
        _key(name, labels, "sum"): seconds,
    }


def _add(amounts: Mapping[str, float], *, soon: bool = False) -> None:
    """``amounts`` added: in Redis at once, or with ``soon`` within ``FLUSH_SECONDS`` (``flush``)."""
    with _lock:
        added = _local if not settings.REDIS_URL else _pending
        for key, amount in amounts.items():
            added[key] = added.get(key, 0) + amount
    if not settings.REDIS_URL:
        return
    if soon:
        _sender_started()
        _due.set()
    else:
        flush()


def flush() -> None:
    """This process's pending events sent, in one pipelined round trip."""
    global _warned
    with _lock:
        amounts = dict(_pending)
        _pending.clear()
    if not amounts:
        return
    try:
        pipe = _redis().pipeline(transaction=False)
        for key, amount in amounts.items():
            if isinstance(amount, int):
                pipe.hincrby(_hash_key(), key, amount)
            else:
                pipe.hincrbyfloat(_hash_key(), key, amount)
        pipe.execute()
    except Exception as exc:  # redis raises several kinds; a metric must never fail the work it counts
        if not _warned:
            log.warning("metrics could not be recorded (%s: %s); dropping them until it works", type(exc).__name__, exc)
            _warned = True


def _sender_started() -> None:
    """The thread that sends this process's pending events, started once per process."""
    global _sender_pid
    if _sender_pid == os.getpid():
        return
    with _lock:
        if _sender_pid == os.getpid():
            return
        _sender_pid = os.getpid()
    threading.Thread(target=_send_when_due, name="ctxweb-metrics", daemon=True).start()


def _send_when_due() -> None:
    while True:
        _due.wait()
        time.sleep(FLUSH_SECONDS)  # what comes meanwhile goes in the same round trip
        _due.clear()
        flush()


def _forked() -> None:
    """A child starts with nothing pending and no sender (the parent's events are the parent's to send)."""
    global _lock, _due, _sender_pid
    _lock, _due, _sender_pid = threading.Lock(), threading.Event(), 0
    _pending.clear()


atexit.register(flush)  # a process that ends cleanly sends what it holds
os.register_at_fork(after_in_child=_forked)


def _hash_key() -> str:
    return settings.CTX_METRICS_KEY
