"""The Codex task, replayed against the requests the real Codex CLI sent it (the fixtures of
``tests/clients/codex.py``): each request holds, right after the input of the one before, the items
the script answered that one; the compacted run's summary request gets the summary, and the request
after it goes on with the step the summary names. The rollout holds every item of the last request."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from typing import Any

import pytest

from tests.clients.codex import FIXTURES, load_fixtures
from tests.fakes.openai_responses import asks_to_compact, message
from tests.fakes.scripted_codex import (
    COMPACTION_ASK,
    FINAL,
    FINAL_FOLLOW_UP,
    FOLLOW_UP,
    PROMPT,
    SIDE_REPLY,
    ScriptedCodex,
)


def said(item: Mapping[str, Any]) -> tuple[Any, ...]:
    """What an item says, without the ids the fake gave it or Codex's bookkeeping."""
    keep = ("type", "role", "name", "call_id", "arguments", "input", "summary", "encrypted_content")
    content = [c.get("text") for c in item.get("content") or [] if isinstance(c, dict)]
    return (*(json.dumps(item.get(k), sort_keys=True) for k in keep), content)


def answers(body: Mapping[str, Any]) -> list[Any]:
    return [said(i) for i in ScriptedCodex()(body)]


FOLDERS = [FIXTURES, FIXTURES / "compacted", FIXTURES / "compacted_remote"]
IDS = ["plain", "compacted", "compacted_remote"]


@pytest.mark.parametrize("folder", FOLDERS, ids=IDS)
def test_each_request_sends_back_what_the_script_answered_the_one_before(folder):
    bodies = [r["body"] for r in load_fixtures(folder)]
    assert len(bodies) >= 11
    for before, after in itertools.pairwise(bodies):
        if COMPACTION_ASK in json.dumps(before["input"][-1]) or asks_to_compact(before):
            continue  # the summary replaces the history, it does not follow the old input
        sent_back = [said(i) for i in after["input"][len(before["input"]) :]]
        answer = answers(before)
        assert sent_back[: len(answer)] == answer, (len(before["input"]), len(after["input"]))
    assert answers(bodies[-1]) == [said(message(FINAL_FOLLOW_UP, phase="final_answer"))]


def test_the_script_reads_turn_and_step_from_the_request():
    bodies = [r["body"] for r in load_fixtures()]
    script = ScriptedCodex()
    steps = [script.progress(b["input"]) for b in bodies]
    first, second = len(script.script[PROMPT]), len(script.script[FOLLOW_UP])
    assert steps == [(1, n) for n in range(first + 1)] + [(2, n) for n in range(second + 1)]
    final = next(b for b in bodies if script.progress(b["input"]) == (1, first))
    assert script(final)[0]["content"][0]["text"] == FINAL
    assert script({"input": [{"role": "user", "content": "Write a title"}]})[0]["content"][0]["text"] == SIDE_REPLY
    assert script.side_requests == 1


def test_the_compacted_run_asks_once_and_goes_on_where_the_summary_says():
    bodies = [r["body"] for r in load_fixtures(FIXTURES / "compacted")]
    asked = [n for n, b in enumerate(bodies) if COMPACTION_ASK in json.dumps(b["input"][-1])]
    assert len(asked) == 1
    script = ScriptedCodex()
    summary = script(bodies[asked[0]])[0]["content"][0]["text"]
    after = bodies[asked[0] + 1]["input"]
    assert any(summary in json.dumps(i) for i in after) and len(after) < len(bodies[asked[0]]["input"])
    assert script.summaries == 1 and script.progress(after)[0] in (1, 2)


def test_the_remote_compaction_sends_a_trigger_and_goes_on_from_the_compaction_item():
    bodies = [r["body"] for r in load_fixtures(FIXTURES / "compacted_remote")]
    asked = [n for n, b in enumerate(bodies) if asks_to_compact(b)]
    assert len(asked) == 1
    before, after = bodies[asked[0]]["input"], bodies[asked[0] + 1]["input"]
    script = ScriptedCodex()
    (sealed,) = script(bodies[asked[0]])
    assert sealed["type"] == "compaction" and script.summaries == 1
    (kept,) = [i for i in after if i["type"] == "compaction"]
    assert kept["encrypted_content"] == sealed["encrypted_content"]
    assert script.progress(after) == script.progress(before[:-1])  # the turn goes on at the same step
    assert not any(i["type"] in ("reasoning", "function_call") for i in after)


FOLDERS = [FIXTURES, FIXTURES / "compacted", FIXTURES / "compacted_remote"]
IDS = ["plain", "compacted", "compacted_remote"]


@pytest.mark.parametrize("folder", FOLDERS, ids=IDS)
def test_the_rollout_holds_every_item_of_the_last_request(folder):
    lines = [json.loads(line) for line in (folder / "rollout.jsonl").read_text().splitlines()]
    recorded = [said(line["payload"]) for line in lines if line["type"] == "response_item"]
    for line in lines:
        if line["type"] == "compacted":
            recorded += [said(i) for i in line["payload"]["replacement_history"]]
    last = load_fixtures(folder)[-1]["body"]["input"]
    assert last[0]["role"] == "developer"  # the base instructions: session_meta, not a response_item
    assert [i for i in map(said, last[1:]) if i not in recorded] == []
