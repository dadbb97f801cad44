"""Gaps (requests forwarded while ctxweb's database was down) are looked for only while some
conversation has one: a recording asks the cache for its conversation's gap only then, and a gap
another process noted is flagged once this process reads the list again. Listing can't drift: a gap
is listed by its key (noted again after a flag, listed again), not counted."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest
from django.core.cache import cache

from ctxweb.cache import redis_client
from sessions_app.models import AgentSession
from sessions_app.services.proxy import gaps
from tests.conftest import _redis_configured, need

pytestmark = pytest.mark.django_db


@pytest.fixture
def clock(monkeypatch):
    now = [time.monotonic()]
    monkeypatch.setattr(gaps, "time", SimpleNamespace(time=time.time, monotonic=lambda: now[0]))
    cache.clear()  # (each test worker has a cache of its own)
    client = redis_client()
    if client is not None:
        client.delete(gaps.GAPS)
    gaps._pending_read[:] = [float("-inf"), 1.0]
    yield now
    cache.clear()
    if client is not None:
        client.delete(gaps.GAPS)


def flagged(session: AgentSession) -> int:
    return AgentSession.objects.get(pk=session.pk).unrecorded_requests


def test_with_no_gap_anywhere_a_recording_does_not_ask_for_its_gap(team, session_of, clock, monkeypatch):
    need(_redis_configured(), "REDIS_URL is not set")
    session = session_of()
    keys: list[str] = []
    get = cache.get

    def counted(key: str, *args: Any, **kwargs: Any) -> Any:
        keys.append(key)
        return get(key, *args, **kwargs)

    monkeypatch.setattr(cache, "get", counted)
    for _ in range(5):
        gaps.gap_flag(session.pk, gaps.gap_key("k", "conversation"))
    assert keys == []


def test_a_gap_this_process_notes_is_flagged_at_the_next_recording_once(team, session_of, clock):
    session, gap = session_of(), gaps.gap_key("k", "mine")
    gaps.gap_flag(session.pk, gap)  # read: none
    gaps.proxy_gap_note(gap)
    gaps.proxy_gap_note(gap)
    gaps.gap_flag(session.pk, gap)
    assert flagged(session) == 2 and cache.get(gap) is None
    gaps.gap_flag(session.pk, gap)
    assert flagged(session) == 2
    gaps.proxy_gap_note(gap)  # another outage: listed again
    gaps.gap_flag(session.pk, gap)
    assert flagged(session) == 3


def test_a_gap_another_process_noted_is_flagged_once_the_list_is_read_again(team, session_of, clock):
    need(_redis_configured(), "REDIS_URL is not set")
    session, gap = session_of(), gaps.gap_key("k", "theirs")
    gaps.gap_flag(session.pk, gap)  # read: none
    noted: dict[str, Any] = {"requests": 3, "from": time.time() - 5, "to": time.time()}
    cache.set(gap, noted, timeout=gaps.GAP_SECONDS)  # what proxy_gap_note leaves in another process
    redis_client().zadd(gaps.GAPS, {gap: time.time() + gaps.GAP_SECONDS})
    gaps.gap_flag(session.pk, gap)
    assert flagged(session) == 0  # not seen yet: kept
    clock[0] += gaps.PENDING_SECONDS
    gaps.gap_flag(session.pk, gap)
    assert flagged(session) == 3 and redis_client().zcard(gaps.GAPS) == 0


def test_a_note_racing_a_flag_leaves_its_request_listed(team, session_of, clock, monkeypatch):
    """A note reads the gap, a recording flags and removes it, the note writes it back: it is listed
    again with it, so a later recording flags it."""
    session, gap = session_of(), gaps.gap_key("k", "race")
    gaps.proxy_gap_note(gap)
    get, raced = cache.get, []

    def flag_meanwhile(key: str, *args: Any, **kwargs: Any) -> Any:
        found = get(key, *args, **kwargs)
        if key == gap and not raced:
            raced.append(key)
            gaps.gap_flag(session.pk, gap)  # another process's recording, between the read and the write
        return found

    monkeypatch.setattr(cache, "get", flag_meanwhile)
    gaps.proxy_gap_note(gap)
    assert flagged(session) == 1
    clock[0] += gaps.PENDING_SECONDS
    gaps.gap_flag(session.pk, gap)
    assert flagged(session) >= 2  # the raced request is not lost (it may count twice, as it always could)
