"""Loaded before Django's settings (``-p tests.xdist_env`` in pyproject's addopts): each pytest-xdist
worker gets a Redis database of its own, as pytest-django gives it a test database of its own.

A cache flush in one worker's test (``cache.clear()`` is FLUSHDB) would otherwise drop the other
worker's cache entries and the queued tasks its Celery worker is waiting for."""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
_url = urlsplit(os.environ.get("REDIS_URL", ""))
if _worker.startswith("gw") and _url.scheme:
    _first = int(_url.path.strip("/") or 0)
    _database = (_first + 1 + int(_worker[2:])) % 16
    os.environ["REDIS_URL"] = urlunsplit(_url._replace(path=f"/{_database}"))
