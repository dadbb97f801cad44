"""CPU seconds spent by each kind of process on this machine (web, workers, Postgres, Redis, the
bench itself), read from /proc: where a load's CPU went, per request, without a profiler in the way."""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
KINDS = (
    ("gunicorn", "web (gunicorn)"),
    ("celery", "workers (celery)"),
    ("postgres", "Postgres"),
    ("redis-server", "Redis"),
    ("bench/", "bench clients"),
)


def _kind(cmdline: str) -> str | None:
    return next((label for needle, label in KINDS if needle in cmdline), None)


def cpu_by_kind() -> defaultdict[str, float]:
    """CPU seconds so far per kind. Postgres backends that have exited are counted through the
    postmaster's reaped-children time, so connections opened and closed in between are not lost."""
    seconds: defaultdict[str, float] = defaultdict(float)
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        kind = _kind(cmdline)
        if kind is None:
            continue
        utime, stime, cutime, cstime = (int(f) for f in fields[11:15])
        own = utime + stime
        # A postmaster (its parent is not Postgres) reaps its backends: their time is in its children's.
        if kind == "Postgres" and fields[1] and "postgres" not in _parent_cmdline(fields[1]):
            own += cutime + cstime
        seconds[kind] += own / TICK
    return seconds


def _parent_cmdline(ppid: str) -> str:
    try:
        return Path(f"/proc/{ppid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def report(before: defaultdict[str, float], after: defaultdict[str, float], *, requests: int, wall: float) -> list[str]:
    """Lines: each kind's CPU seconds, its share of the machine's cores over ``wall``, ms per request."""
    cores = os.cpu_count() or 1
    lines = [f"{'CPU by process':20} {'seconds':>8} {'of cores':>9} {'ms/request':>11}"]
    total = 0.0
    for _, label in KINDS:
        spent = after[label] - before[label]
        total += spent
        lines.append(f"{label:20} {spent:8.1f} {spent / wall / cores:9.0%} {spent / max(requests, 1) * 1000:11.2f}")
    lines.append(f"{'all':20} {total:8.1f} {total / wall / cores:9.0%} {total / max(requests, 1) * 1000:11.2f}")
    return lines


def settled(*, quiet: float = 0.05, every: float = 0.5, timeout: float = 60.0) -> float:
    """Wait until the machine's processes have finished starting up (their CPU over ``every`` seconds
    under ``quiet`` of a core), so a measurement that starts now counts the load, not the start-up (a
    Celery worker loading Django and the tokenizer). The seconds waited."""
    import time

    started = time.monotonic()
    before = sum(cpu_by_kind().values())
    while time.monotonic() - started < timeout:
        time.sleep(every)
        now = sum(cpu_by_kind().values())
        if now - before < quiet * every:
            break
        before = now
    return time.monotonic() - started
