"""Transcript sync continues from what the database holds: uploads served by processes that share no
cache (gunicorn workers without Redis, a Redis restart or eviction) never answer 409, and the session
is the import's. Whatever the server keeps of a transcript goes with its session (delete, prune)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone

from sessions_app.models import AgentSession, TranscriptChunk
from sessions_app.services import retention
from tests.claude_code_lines import agent_session
from tests.sessions_app.test_transcript_sync import bob, imported, line_ends, stored, upload  # noqa: F401 - fixture
from tests.shared_data import SHARED_DATA

pytestmark = pytest.mark.django_db

SHARED = SHARED_DATA / "claude_code" / "spotter_subagent.jsonl"
NO_CACHE = {"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}}


def growing(data: str, uploads: int) -> list[tuple[int, int]]:
    """``uploads`` byte ranges of ``data``, each ending at a line end, as a file grows."""
    ends = [*line_ends(data), len(data.encode())]
    picks = sorted({ends[round(i * (len(ends) - 1) / uploads)] for i in range(1, uploads + 1)})
    return list(zip([0, *picks[:-1]], picks, strict=True))


@pytest.mark.parametrize("source", ["generated", "shared"])
def test_uploads_served_by_processes_sharing_no_cache_never_ask_for_a_resend(bob, team, source):  # noqa: F811
    if source == "shared" and not SHARED.exists():
        pytest.skip("shared data missing")
    data = SHARED.read_text() if source == "shared" else agent_session(8, sub_agent=True).text()
    raw = data.encode()
    codes = []
    ranges = growing(data, 15)
    for i, (start, end) in enumerate(ranges):
        cache.clear()  # the next worker's cache: empty (its own process, or Redis restarted)
        response = upload(bob, team, raw[start:end].decode(), start, final=i == len(ranges) - 1)
        codes.append(response.status_code)
    assert codes == [200] * len(ranges)
    main = AgentSession.objects.get(pk=response.json()["session"])
    reference = imported(team, data, name=main.name)
    assert stored(main.pk) == stored(reference.session.pk)
    sides = [AgentSession.objects.get(pk=pk) for pk in response.json()["sidechains"]]
    assert [stored(s.pk) for s in sides] == [stored(s.pk) for s in reference.sidechains]


def test_without_any_cache_a_repeat_is_still_checked_byte_for_byte(bob, team, settings):  # noqa: F811
    settings.CACHES = NO_CACHE
    data = agent_session(2).text()
    raw = data.encode()
    half = line_ends(data)[4]
    assert upload(bob, team, raw[:half].decode(), 0).status_code == 200
    assert upload(bob, team, raw[half:].decode(), half).status_code == 200
    repeat = upload(bob, team, data, 0, final=True)
    assert (repeat.status_code, repeat.json()["received"]) == (200, 0)
    changed = upload(bob, team, data.replace("Step 1", "Step X"), 0)
    assert (changed.status_code, changed.json()["code"]) == (409, "transcript_changed")


def test_what_the_server_keeps_goes_with_the_session(bob, team, api_as):  # noqa: F811
    data = agent_session(2).text()
    session = upload(bob, team, data, 0, final=True).json()["session"]
    assert TranscriptChunk.objects.filter(session_id=session).exists()
    assert api_as(team.alice).delete(f"/api/v1/sessions/{session}/").status_code == 204
    assert not TranscriptChunk.objects.exists()


def test_the_pruner_drops_the_text_of_a_session_it_archives(bob, team):  # noqa: F811
    data = agent_session(2).text()
    session = upload(bob, team, data, 0, final=True).json()["session"]
    retention.prune_run(now=timezone.now() + timedelta(days=1), older_than_days=0)
    assert AgentSession.objects.get(pk=session).status == "archived"
    assert not TranscriptChunk.objects.filter(session_id=session).exists()
