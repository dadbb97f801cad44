"""The cache backends: a Redis cache that degrades instead of failing, and the bounded local-memory
cache of the embedded mode's exact counts.

When Redis is unreachable, reads miss and writes are dropped (with a warning in the log), so requests
keep working — rate limits and cached counts simply pause until Redis is back.

Both can say how many entries they hold (``entry_count``) for the ops page and ``ctx count --stats``."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache, RedisCacheClient

log = logging.getLogger(__name__)


def redis_client() -> Any:
    """The Redis client behind the default cache (for what the cache API has no call for: a pipeline,
    a sorted set), or None in the embedded mode."""
    from django.conf import settings
    from django.core.cache import cache

    if not settings.REDIS_URL:
        return None
    return cache._cache.get_client(write=True)  # type: ignore[attr-defined]  # Django's RedisCache


@runtime_checkable
class EntryCounting(Protocol):
    def entry_count(self) -> int: ...


def _unavailable(exc: Exception) -> bool:
    import redis

    return isinstance(exc, redis.exceptions.ConnectionError | redis.exceptions.TimeoutError | OSError)


class _ReusedClients(RedisCacheClient):
    """Django's Redis cache client builds a ``redis.Redis`` for every call, and a ``redis.Redis`` fills
    a table of some 170 reply handlers as it is made: a third of a millisecond on each cache call
    of every request. One client per connection pool serves every call instead (a client is
    thread-safe: each command takes a connection from the pool)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, Any] = {}

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        pool = self._get_connection_pool(write)  # type: ignore[attr-defined]  # Django's, not in the stubs
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients.setdefault(id(pool), self._client(connection_pool=pool))  # type: ignore[attr-defined]
        return client


class ResilientRedisCache(RedisCache):
    _cache: RedisCacheClient  # RedisCache's own client (a cached property the stubs leave out)

    def __init__(self, server: Any, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = _ReusedClients

    def _guard(self, operation: str, default: Any, call: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return call(*args, **kwargs)
        except Exception as exc:
            if not _unavailable(exc):
                raise
            log.warning("cache unavailable (%s during %s); going on without it", type(exc).__name__, operation)
            return default

    def get(self, key: Any, default: Any = None, version: int | None = None) -> Any:
        return self._guard("get", default, super().get, key, default, version)

    def set(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> None:
        return self._guard("set", None, super().set, key, value, timeout, version)

    def add(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        return self._guard("add", False, super().add, key, value, timeout, version)

    def delete(self, key: Any, version: int | None = None) -> bool:
        return self._guard("delete", False, super().delete, key, version)

    def get_many(self, keys: Any, version: int | None = None) -> dict:
        return self._guard("get_many", {}, super().get_many, keys, version)

    def set_many(self, data: dict, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> list:
        return self._guard("set_many", [], super().set_many, data, timeout, version)

    def incr(self, key: Any, delta: int = 1, version: int | None = None) -> int:
        return self._guard("incr", delta, super().incr, key, delta, version)

    def touch(self, key: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        return self._guard("touch", False, super().touch, key, timeout, version)

    def entry_count(self) -> int:
        """Live keys under this cache's own prefix (a SCAN: for an ops page, not for every request).
        Give the cache a KEY_PREFIX of its own, or it counts every cache sharing its Redis database."""
        pattern = self.make_key("*")

        def scan() -> int:
            client = self._cache.get_client(None)
            return sum(1 for _ in client.scan_iter(match=pattern, count=1000))

        return int(self._guard("entry_count", 0, scan))


class LruLocMemCache(LocMemCache):
    """Local memory holding at most MAX_ENTRIES: storing a new key drops only the least recently used
    entry. (Django's own drops a third of its entries at once when full, and culls even when an
    existing key is overwritten.)"""

    # LocMemCache's state, set by its __init__; the stubs leave it out.
    _cache: OrderedDict[str, Any]
    _expire_info: dict[str, float | None]
    _lock: threading.Lock
    if TYPE_CHECKING:

        def _has_expired(self, key: str) -> bool: ...

    @property
    def max_entries(self) -> int:
        return self._max_entries

    def _set(self, key: str, value: Any, timeout: Any = DEFAULT_TIMEOUT) -> None:
        # Called with the lock held. Reads and writes move a key to the front, so the end is the
        # least recently used.
        if key not in self._cache:
            while self._cache and len(self._cache) >= self._max_entries:
                dropped, _ = self._cache.popitem()
                self._expire_info.pop(dropped, None)
        self._cache[key] = value
        self._cache.move_to_end(key, last=False)
        self._expire_info[key] = self.get_backend_timeout(timeout)

    def entry_count(self) -> int:
        with self._lock:
            return sum(not self._has_expired(key) for key in self._cache)
