"""Gaps (requests forwarded while ctxweb's database was down) are looked for only while some
conversation has one: a recording asks the cache for its conversation's gap only then, and a gap
another process noted is flagged once this process reads the count again."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.core.cache import cache

from sessions_app.models import AgentSession
from sessions_app.services.proxy import gaps

pytestmark = pytest.mark.django_db


@pytest.fixture
def clock(monkeypatch):
    now = [time.monotonic()]
    monkeypatch.setattr(gaps.time, "monotonic", lambda: now[0])
    cache.delete(gaps.PENDING)
    gaps._pending_read[:] = [float("-inf"), 1.0]
    yield now
    cache.delete(gaps.PENDING)


def asked(monkeypatch) -> list[str]:
    keys: list[str] = []
    get = cache.get

    def counted(key: str, *args: Any, **kwargs: Any) -> Any:
        keys.append(key)
        return get(key, *args, **kwargs)

    monkeypatch.setattr(cache, "get", counted)
    return keys


def test_with_no_gap_anywhere_a_recording_asks_the_cache_once_a_second_not_for_its_gap(
    team, session_of, clock, monkeypatch
):
    session = session_of()
    keys = asked(monkeypatch)
    for _ in range(5):
        gaps.gap_flag(session.pk, gaps.gap_key("k", "conversation"))
    assert keys == [gaps.PENDING]
    clock[0] += gaps.PENDING_SECONDS
    gaps.gap_flag(session.pk, gaps.gap_key("k", "conversation"))
    assert keys == [gaps.PENDING, gaps.PENDING]


def test_a_gap_this_process_notes_is_flagged_at_the_next_recording(team, session_of, clock):
    session, gap = session_of(), gaps.gap_key("k", "mine")
    gaps.gap_flag(session.pk, gap)  # the count read: none
    gaps.proxy_gap_note(gap)
    gaps.proxy_gap_note(gap)
    gaps.gap_flag(session.pk, gap)
    assert AgentSession.objects.get(pk=session.pk).unrecorded_requests == 2
    assert cache.get(gap) is None and cache.get(gaps.PENDING) == 0
    gaps.gap_flag(session.pk, gap)  # flagged once
    assert AgentSession.objects.get(pk=session.pk).unrecorded_requests == 2


def test_a_gap_another_process_noted_is_flagged_once_the_count_is_read_again(team, session_of, clock):
    session, gap = session_of(), gaps.gap_key("k", "theirs")
    gaps.gap_flag(session.pk, gap)  # the count read: none
    noted: dict[str, Any] = {"requests": 3, "from": time.time() - 5, "to": time.time()}
    cache.set(gap, noted, timeout=gaps.GAP_SECONDS)  # what proxy_gap_note leaves in another process
    cache.add(gaps.PENDING, 0)
    cache.incr(gaps.PENDING)
    gaps.gap_flag(session.pk, gap)
    assert AgentSession.objects.get(pk=session.pk).unrecorded_requests == 0  # not seen yet: kept
    clock[0] += gaps.PENDING_SECONDS
    gaps.gap_flag(session.pk, gap)
    assert AgentSession.objects.get(pk=session.pk).unrecorded_requests == 3
    assert cache.get(gaps.PENDING) == 0
