"""However large a message, a page shows a bounded excerpt of it: the session page, its live poll and
the timeline it reloads stay small, and the whole message (or its original, once compacted) is
reachable a page at a time."""

from __future__ import annotations

import html
import re

import pytest
from django.test import Client
from django.urls import reverse

from sessions_app.models import Message
from sessions_app.services import compaction_runs
from sessions_app.web.pages import EXCERPT_CHARS
from tests.sessions_app.compaction_helpers import agent_rounds, append

pytestmark = pytest.mark.django_db

PAGE_BUDGET = 200_000  # bytes: what one answer may weigh, whatever the message
HUGE = 3_000_000


def url(name: str, *args) -> str:
    return reverse(f"web:{name}", args=args)


def huge_log() -> str:
    lines, size, i = [], 0, 0
    while size < HUGE:
        line = f"step {i:07d}: compiled module_{i % 977} in {i % 89} ms\n"
        lines.append(line)
        size += len(line)
        i += 1
    return "".join(lines)


@pytest.fixture
def viewer(client, team) -> Client:
    client.force_login(team.carol.user)
    return client


@pytest.fixture
def huge(session_of):
    """A session whose third message is a 3 MB tool result."""
    session = session_of(name="Huge output", model="claude-sonnet-4-5", auto_compact=False)
    text = huge_log()
    append(
        session,
        [
            {"role": "user", "content": "Build it and show me the log."},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_big", "name": "Bash", "input": {"command": "make"}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_big", "content": text}]},
        ],
    )
    return session, Message.objects.get(session=session, seq=3), text


def pages_of(client: Client, path: str) -> str:
    """Every page of a message's view, each within the budget; the text of their blocks, joined."""
    first = client.get(path)
    assert first.status_code == 200
    match = re.search(r"page 1 of (\d+)", first.content.decode())
    count = int(match.group(1)) if match else 1
    text = []
    for number in range(1, count + 1):
        response = client.get(path, {"page": number})
        assert response.status_code == 200
        assert len(response.content) < PAGE_BUDGET, (number, len(response.content))
        text += [html.unescape(p) for p in re.findall(r"<pre>(.*?)</pre>", response.content.decode(), re.S)]
    return "".join(text)


def test_the_session_page_and_its_live_poll_show_an_excerpt_of_a_huge_message(viewer, huge):
    session, message, text = huge
    note = f"… {len(text) - EXCERPT_CHARS:,} more characters"
    for path in (url("session", session.pk), url("session-timeline", session.pk)):
        response = viewer.get(path)
        assert response.status_code == 200, path
        assert len(response.content) < PAGE_BUDGET, (path, len(response.content))
        body = response.content.decode()
        assert text[:EXCERPT_CHARS] in body and text[: EXCERPT_CHARS + 1] not in body
        assert note in body and f'href="{url("message", message.pk)}"' in body
    live = viewer.get(url("session-live", session.pk))
    assert live.status_code == 200 and live["HX-Trigger"] == "session-changed"
    assert len(live.content) < PAGE_BUDGET


def test_the_whole_message_is_reachable_a_page_at_a_time(viewer, huge):
    session, message, text = huge
    assert pages_of(viewer, url("message", message.pk)) == text
    short = Message.objects.get(session=session, seq=1)
    page = viewer.get(url("message", short.pk)).content.decode()
    assert "Build it and show me the log." in page and "page 1 of" not in page


def test_many_blocks_are_cut_to_the_first_ones(viewer, session_of):
    session = session_of(name="Many blocks")
    blocks = [{"type": "text", "text": f"part {i}"} for i in range(60)]
    append(session, [{"role": "assistant", "content": blocks}])
    body = viewer.get(url("session", session.pk)).content.decode()
    assert "part 19" in body and "part 20" not in body and "… 40 more blocks" in body
    message = Message.objects.get(session=session)
    assert pages_of(viewer, url("message", message.pk)) == "".join(f"part {i}" for i in range(60))


def test_the_original_of_a_compacted_huge_message_is_an_excerpt_then_paged(viewer, huge):
    session, message, text = huge
    append(session, agent_rounds(6))
    record = compaction_runs.compaction_request(session=session, level="compact", user=None)
    compaction_runs.compaction_run(record.pk)
    message.refresh_from_db()
    assert message.state == "compacted", "the 3 MB tool result should be the first thing compacted"
    inline = viewer.get(url("message-original", message.pk), HTTP_HX_REQUEST="true")
    assert inline.status_code == 200 and len(inline.content) < PAGE_BUDGET
    assert f"… {len(text) - EXCERPT_CHARS:,} more characters" in inline.content.decode()
    assert pages_of(viewer, url("message-original", message.pk)) == text


def test_outsiders_get_404_for_a_message(client, team, huge):
    _, message, _ = huge
    client.force_login(team.mallory.user)
    assert client.get(url("message", message.pk)).status_code == 404
    assert client.get(url("message-original", message.pk)).status_code == 404
    assert client.get(url("message", 999_999)).status_code == 404
