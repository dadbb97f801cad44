"""A Redis cache that degrades instead of failing: when Redis is unreachable, reads miss and writes
are dropped (with a warning in the log), so requests keep working — rate limits and cached counts
simply pause until Redis is back."""

from __future__ import annotations

import logging
from typing import Any

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache

log = logging.getLogger(__name__)


def _unavailable(exc: Exception) -> bool:
    import redis

    return isinstance(exc, redis.exceptions.ConnectionError | redis.exceptions.TimeoutError | OSError)


class ResilientRedisCache(RedisCache):
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
