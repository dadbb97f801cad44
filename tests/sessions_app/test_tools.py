"""Tokens by tool (``selectors.tools``, ``GET /sessions/{id}/tools/``, the session page's table): each
tool's figures are what its blocks count with the tokenizer, summed here block by block; what
compaction took back is what the removed or shrunk blocks counted, and a revert gives it back."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from compaction.tokens import OfflineTokenizer, calibrate
from sessions_app.models import AgentSession, Message, MessageBackup
from sessions_app.selectors import usage
from sessions_app.selectors.tools import session_tools
from tests.sessions_app.compaction_helpers import agent_rounds, append

pytestmark = pytest.mark.django_db

TOKENIZER = OfflineTokenizer()


def expected(session: AgentSession) -> dict[str, dict[str, int]]:
    """Each tool's figures, every block counted on its own: as received (the oldest backup in force, else
    the message), and taken back: a summarized message's blocks whole, a rewritten one's by the difference."""
    originals: dict[int, Any] = {}
    for backup in MessageBackup.objects.filter(compaction__session=session, compaction__status="succeeded").order_by(
        "-compaction_id"
    ):
        originals[backup.message_id] = backup.content  # the oldest is written last
    names: dict[str, str] = {}
    raw: dict[str, dict[str, int]] = defaultdict(
        lambda: dict.fromkeys(("calls", "results", "call", "result", "taken"), 0)
    )
    rows = list(Message.objects.filter(session=session).order_by("seq"))
    for row in rows:
        for block in _blocks(originals.get(row.pk, row.content)):
            if block["type"] == "tool_use":
                names[block["id"]] = block["name"]
    for row in rows:
        now = {} if row.state == "summarized" else {_key(b): TOKENIZER.count_block(b) for b in _blocks(row.content)}
        for block in _blocks(originals.get(row.pk, row.content)):
            n = TOKENIZER.count_block(block)
            call = block["type"] == "tool_use"
            figures = raw[block["name"] if call else names[block["tool_use_id"]]]
            figures["calls" if call else "results"] += 1
            figures["call" if call else "result"] += n
            figures["taken"] += max(n - now.get(_key(block), 0), 0)
    factor = usage.model_info(session.model).calibration
    return {
        name: {
            "calls": f["calls"],
            "results": f["results"],
            "call_tokens": calibrate(f["call"], factor),
            "result_tokens": calibrate(f["result"], factor),
            "taken_back": calibrate(f["taken"], factor),
        }
        for name, f in raw.items()
    }


def _blocks(content: Any) -> list[dict[str, Any]]:
    if not isinstance(content, list):
        return []
    return [b for b in content if b.get("type") in ("tool_use", "tool_result")]


def _key(block: dict[str, Any]) -> tuple[str, str]:
    return (block["type"], block.get("id") or block["tool_use_id"])


def found(session: AgentSession) -> dict[str, dict[str, int]]:
    fields = ("calls", "results", "call_tokens", "result_tokens", "taken_back")
    return {t.tool: {name: getattr(t, name) for name in fields} for t in session_tools(session).tools}


def parallel_calls() -> list[dict[str, Any]]:
    """Parallel calls in one message, their results (one a list of blocks) in one, with text around."""
    return [
        {"role": "user", "content": "Find where the parser breaks."},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading both files."},
                {"type": "tool_use", "id": "r1", "name": "Read", "input": {"path": "src/parser.py"}},
                {"type": "tool_use", "id": "g1", "name": "Grep", "input": {"pattern": "def parse", "path": "src"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "r1", "content": "def parse(text):\n    return text\n" * 60},
                {
                    "type": "tool_result",
                    "tool_use_id": "g1",
                    "content": [{"type": "text", "text": "src/parser.py:1: def parse(text):"}],
                },
                {"type": "text", "text": "Both came back."},
            ],
        },
        {"role": "assistant", "content": "The parser returns its input unchanged."},
    ]


@pytest.fixture
def busy(session_of):
    session = session_of(model="claude-sonnet-4-5", context_window=30_000, auto_compact=False)
    append(session, parallel_calls() + agent_rounds(24))
    return session


def compact(api, session, level="compact"):
    response = api.post(f"/api/v1/sessions/{session.pk}/compactions/", {"level": level})
    assert response.status_code == 202, response.content
    assert response.json()["status"] == "succeeded", response.json()
    return response.json()


def test_each_tool_counts_what_its_blocks_count(session_of):
    session = session_of(model="claude-sonnet-4-5")
    append(session, parallel_calls() + agent_rounds(3))
    figures = found(session)
    assert figures == expected(session)
    assert set(figures) == {"Bash", "Read", "Grep"}
    assert figures["Bash"]["calls"] == figures["Bash"]["results"] == 3
    assert figures["Read"]["result_tokens"] > figures["Grep"]["result_tokens"] > 0
    assert all(f["taken_back"] == 0 for f in figures.values())
    report = session_tools(session)
    assert report.tools[0].tool == "Bash"  # the most tokens first
    assert report.total.tokens == sum(t.tokens for t in report.tools)


def test_compaction_takes_back_exactly_the_removed_blocks_and_a_revert_gives_them_back(busy, api_as, team):
    api = api_as(team.alice)
    pruned = compact(api, busy)
    after_prune = found(busy)
    assert after_prune == expected(busy)
    assert after_prune["Bash"]["taken_back"] > 0
    summarized = compact(api, busy, level="summarize")
    after_summary = found(busy)
    assert after_summary == expected(busy)
    assert sum(f["taken_back"] for f in after_summary.values()) > sum(f["taken_back"] for f in after_prune.values())
    assert api.post(f"/api/v1/compactions/{summarized['id']}/revert/").status_code == 200
    assert found(busy) == after_prune
    assert api.post(f"/api/v1/compactions/{pruned['id']}/revert/").status_code == 200
    assert all(f["taken_back"] == 0 for f in found(busy).values())
    # As received, whatever happened in between.
    assert {n: f["result_tokens"] for n, f in found(busy).items()} == {
        n: f["result_tokens"] for n, f in after_summary.items()
    }


def test_a_result_whose_count_is_not_a_sum_of_blocks_is_counted_itself(session_of):
    session = session_of(model="claude-sonnet-4-5")
    append(session, parallel_calls())
    Message.objects.filter(session=session, seq=3).update(tokens=1)  # counted some other way
    assert found(session) == expected(session)


def test_api_answers_members_and_viewers_and_404s_outsiders(busy, api_as, team):
    body = api_as(team.carol).get(f"/api/v1/sessions/{busy.pk}/tools/").json()
    assert {t["tool"]: t["result_tokens"] for t in body["tools"]} == {
        name: f["result_tokens"] for name, f in expected(busy).items()
    }
    assert body["total"]["tokens"] == sum(t["tokens"] for t in body["tools"])
    assert body["token_source"] == "estimate"
    outsider = api_as(team.mallory).get(f"/api/v1/sessions/{busy.pk}/tools/")
    assert outsider.status_code == 404 and outsider.json()["code"]


def test_session_page_shows_the_table(busy, client, team):
    client.force_login(team.alice.user)
    page = client.get(f"/sessions/{busy.pk}/").content.decode()
    figures = expected(busy)
    for name, f in figures.items():
        assert f'data-tool="{name}" data-calls="{f["calls"]}"' in page
        assert f'data-tokens="{f["call_tokens"] + f["result_tokens"]}"' in page
