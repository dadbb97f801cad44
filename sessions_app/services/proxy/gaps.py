"""Requests the proxy forwarded without recording them (ctxweb's database was unreachable): counted
in the cache, which needs no database, by caller and conversation, until the conversation is
recorded again and its session says what was missed (``AgentSession.unrecorded_*``, a STATUS
warning). The messages of those requests come with the agent's next request; their usage does not."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from datetime import UTC, datetime

from django.core.cache import cache
from django.db.models import F, Value
from django.db.models.functions import Coalesce

from ctxweb.cache import redis_client
from sessions_app.models import AgentSession

log = logging.getLogger(__name__)


GAP_SECONDS = 30 * 24 * 3600  # how long requests forwarded unrecorded wait for their conversation
# Every conversation with a gap, its key scored by when its gap expires (``time.time``): a sorted set
# in Redis, for what the cache API has no call for (the embedded mode's one process asks its cache).
GAPS = "ctx:proxy-gaps"
PENDING_SECONDS = 1.0  # how long a process goes by what it read (recordings don't each ask)
_pending_read: list[float] = [float("-inf"), 1.0]  # when this process last read GAPS, and how many it listed


def gap_key(ctxweb_key: str, conversation: str) -> str:
    """Where a conversation's requests forwarded unrecorded are counted: by the caller's ctxweb key
    (hashed; the database that says whose it is may be the one that is down) and the conversation."""
    digest = hashlib.sha256(f"{ctxweb_key}\x00{conversation}".encode(errors="replace")).hexdigest()
    return f"ctx:proxy-gap:{digest[:40]}"


def proxy_gap_note(gap: str) -> None:
    """A request of the conversation went upstream unrecorded (ctxweb's database was unreachable): kept
    in the cache, not the database, until the conversation is recorded again and its session flagged.
    Best effort: with the cache down too, the gap goes unflagged (the messages still come with the
    next request)."""
    try:
        now = time.time()
        noted = cache.get(gap) or {"requests": 0, "from": now}
        noted.update(requests=noted["requests"] + 1, to=now)
        cache.set(gap, noted, timeout=GAP_SECONDS)
        # Listed after it is written: a recording that flagged and unlisted it meanwhile (between the read
        # and the write above) can't leave the request written back unlisted.
        if (client := redis_client()) is not None:
            listing = client.pipeline(transaction=False)
            listing.zadd(GAPS, {gap: now + GAP_SECONDS})
            listing.zremrangebyscore(GAPS, "-inf", now)
            listing.expire(GAPS, GAP_SECONDS)
            listing.execute()
        _pending_read[0] = float("-inf")  # this process's next recording asks
    except Exception as exc:  # the cache is down as well
        log.warning("proxy: a request forwarded unrecorded could not be noted: %s", type(exc).__name__)


def gap_flag(session_id: int, gap: str) -> None:
    """The requests of the conversation forwarded unrecorded (``gap``), flagged on its session. Asked
    only while some conversation has a gap (``gaps_pending``)."""
    if not gaps_pending():
        return
    noted = cache.get(gap)
    if not isinstance(noted, dict) or not noted.get("requests"):
        return
    if not cache.delete(gap):  # two recordings of the conversation at once: the other flags it
        return
    with contextlib.suppress(Exception):  # Redis gone meanwhile: listed until it expires, a read for each recording
        if (client := redis_client()) is not None:
            client.zrem(GAPS, gap)
    first, last = (datetime.fromtimestamp(noted[k], tz=UTC) for k in ("from", "to"))
    AgentSession.objects.filter(pk=session_id).update(
        unrecorded_requests=F("unrecorded_requests") + int(noted["requests"]),
        unrecorded_from=Coalesce(F("unrecorded_from"), Value(first)),
        unrecorded_to=Value(last),
    )
    log.warning("proxy: session %s: %s request(s) were forwarded unrecorded", session_id, noted["requests"])


def gaps_pending() -> bool:
    """Whether some conversation may have requests forwarded unrecorded (``GAPS`` lists one that has not
    expired), read at most once every ``PENDING_SECONDS`` in a process: a recording doesn't ask the
    cache for its conversation's gap while there is none anywhere. A gap another process noted is seen
    up to that late (the conversation's next recording flags it); one this process noted, at once. With
    Redis unreachable, yes (the cache's reads then miss anyway)."""
    client = redis_client()
    if client is None:
        return True
    read_at, count = _pending_read
    now = time.monotonic()
    if now - read_at >= PENDING_SECONDS:
        try:
            count = float(client.zcount(GAPS, time.time(), "+inf"))
        except Exception:  # redis raises several kinds
            count = 1.0
        _pending_read[:] = [now, count]
    return count > 0
