"""``ctx count --stats`` and ``--clear`` as lines a person reads."""

from __future__ import annotations

from sessions_app.selectors.count_cache import CacheStats


def stats_line(stats: CacheStats) -> str:
    if stats.backend == "redis":
        where, size = "Redis, shared by every process", f"{stats.size:,} entries"
    else:
        # Without Redis each process has its own cache: this command's is new and empty.
        where = "this command's own memory: without Redis, the web server's is on its /ops/ page"
        size = f"{stats.size:,} of {stats.max_entries or 0:,} entries"
    rate = f" ({stats.hit_rate:.1%} hits)" if stats.hit_rate is not None else ""
    return (
        f"Exact-count cache ({where}): {stats.hits:,} hits, {stats.misses:,} misses{rate}; "
        f"{size}, each kept {stats.ttl_seconds:,} s."
    )


def cleared_line(removed: int, backend: str) -> str:
    line = f"Cleared the exact-count cache: {removed:,} entries removed, hits and misses reset."
    if backend != "redis":
        line += " (Without Redis this is this command's own memory: clear the web server's on its /ops/ page.)"
    return line
