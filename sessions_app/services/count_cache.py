"""Clearing the exact-count cache (``selectors.count_cache``): its entries and its hit and miss
counters, for ``ctx count --clear`` and the ops page.

Only ctxweb's exact counts go: with Redis, the keys under the alias's own prefix (``ctx-exact``), so
Celery's queues and every other cache in the same database stay; in local memory, the alias's own
store. Sessions' stored exact counts are not touched: each holds for its own session until its next
message, whatever the cache holds."""

from __future__ import annotations

from typing import Any

from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache

from ctxweb.cache import EntryCounting, ResilientRedisCache
from sessions_app.selectors import count_cache

SCAN_BATCH = 1000


def exact_count_cache_clear() -> int:
    """Remove every exact count and reset the hit and miss counters; returns how many entries went."""
    cache = count_cache.exact_count_cache()
    if isinstance(cache, RedisCache):
        removed = _redis_clear(cache)
    elif isinstance(cache, LocMemCache):
        removed = cache.entry_count() if isinstance(cache, EntryCounting) else 0
        cache.clear()  # this alias's own store: local-memory caches are kept per LOCATION
    else:
        # Another backend's clear() may empty more than this alias (RedisCache's is a FLUSHDB).
        raise TypeError(f"can't clear the exact-count cache kept by {type(cache).__name__}")
    for key in count_cache.STATS_KEYS.values():  # one by one: ResilientRedisCache guards delete
        count_cache.stats_cache().delete(key)
    return removed


def _redis_clear(cache: RedisCache) -> int:
    """Delete the keys under this cache's prefix, a SCAN batch at a time (never FLUSHDB: the database
    may hold the broker's queues and other caches)."""
    pattern = cache.make_key("*")

    def clear() -> int:
        client: Any = cache._cache.get_client(None, write=True)  # type: ignore[attr-defined]
        removed, batch = 0, []
        for key in client.scan_iter(match=pattern, count=SCAN_BATCH):
            batch.append(key)
            if len(batch) >= SCAN_BATCH:
                removed += client.delete(*batch)
                batch = []
        if batch:
            removed += client.delete(*batch)
        return int(removed)

    if isinstance(cache, ResilientRedisCache):
        return int(cache._guard("clear", 0, clear))
    return clear()
