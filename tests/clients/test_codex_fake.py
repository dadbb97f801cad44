"""The real Codex CLI straight against the fake Responses API, playing the scripted coding task of
``tests/fakes/scripted_codex.py`` over two user turns (``exec``, then ``exec resume --last``): the task
gets done in the working directory, every request carries the headers ctxweb's proxy needs, and the
rollout file Codex wrote holds every item of every request. With a small window Codex compacts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.clients.codex import COMPACTING, Run, installed, run_codex
from tests.conftest import need
from tests.fakes.openai_responses import asks_to_compact
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.scripted_codex import (
    COMPACTION_ASK,
    FINAL,
    FINAL_FOLLOW_UP,
    FOLLOW_UP,
    PROMPT,
    ScriptedCodex,
    turns,
)

pytestmark = [pytest.mark.slow]

HEADERS = {"ctxweb-project": "codex"}
KEY = "ctx-key-for-the-fake"


def play(
    tmp_path: Path, settings: dict[str, object] | None = None, *, remote_compaction: bool = False
) -> tuple[FakeOpenAI, ScriptedCodex, Run]:
    need(installed(), "node or the pinned Codex CLI is missing (make clients)")
    workdir, home = tmp_path / "project", tmp_path / "home"
    workdir.mkdir()
    script = ScriptedCodex()
    with FakeOpenAI() as server:
        server.responses.set_responder(script)
        for prompt, resume in ((PROMPT, False), (FOLLOW_UP, True)):
            run = run_codex(server.base_url, workdir, home, prompt, resume=resume, headers=HEADERS, ctxweb_key=KEY,
                            api_key="sk-upstream", settings=settings, remote_compaction=remote_compaction)  # fmt: skip
            assert run.returncode == 0, run.stderr[-3000:]
    return server, script, run


def rollout_lines(run: Run) -> list[dict[str, Any]]:
    (rollout,) = run.rollouts()  # one conversation, resumed in the same file
    return [json.loads(line) for line in rollout.read_text().splitlines()]


def without_ids(item: dict[str, Any]) -> dict[str, Any]:
    # The rollout keeps what Codex sent plus its own bookkeeping beside it.
    return {k: v for k, v in item.items() if k not in ("internal_chat_message_metadata_passthrough", "metadata")}


def test_codex_does_the_scripted_task_and_its_rollout_holds_every_request(tmp_path):
    server, script, run = play(tmp_path)
    workdir = run.workdir

    # the task is done: files written by apply_patch, edited, tested by commands Codex ran
    assert (workdir / "greet.py").read_text() == "print('hello from codex')\n"
    assert (workdir / "test_greet.py").exists()
    assert run.stdout.strip().endswith(FINAL_FOLLOW_UP)
    steps = sum(len(s) for s in turns().values())
    assert len(server.requests) == steps + 2 >= 10 and script.side_requests == 0 and script.summaries == 0

    # every request: the Responses wire, the upstream key, ctxweb's headers, Codex's session headers
    for request in server.requests:
        assert request["path"] == "/v1/responses"
        headers, body = request["headers"], request["body"]
        assert headers["authorization"] == "Bearer sk-upstream"
        assert headers["ctxweb-project"] == "codex" and headers["ctxweb-api-key"] == KEY
        assert headers["session-id"] == body["prompt_cache_key"] == headers["thread-id"]
        assert body["stream"] is True and body["store"] is False and "instructions" not in body
        assert body["include"] == ["reasoning.encrypted_content"]
    tools = {t.get("name", t["type"]) for t in server.requests[0]["body"]["tools"]}
    assert {"exec_command", "apply_patch", "web_search"} <= tools

    # what the commands answered came back to the model: one failed, two ran in parallel
    last = server.requests[-1]["body"]["input"]
    answers = ("function_call_output", "custom_tool_call_output")
    outputs = {i["call_id"]: i["output"] for i in last if i["type"] in answers}
    assert "Process exited with code 1" in outputs["call_readme"]
    assert "hello from codex" in outputs["call_run2"] and "1 greet.py" in outputs["call_wc"]
    assert "Success" in outputs["call_add"] and "00700: a line of a large output" in outputs["call_large"]
    assert any(i["type"] == "message" and i["role"] == "assistant" and FINAL in json.dumps(i) for i in last)

    # the rollout: one session_meta with the base instructions, then every item every request sent
    lines = rollout_lines(run)
    meta = lines[0]
    assert meta["type"] == "session_meta" and meta["payload"]["id"] == server.requests[0]["headers"]["session-id"]
    # base_instructions is the template; what exec sends (the first developer message) leaves lines out
    template, sent_first = meta["payload"]["base_instructions"]["text"], last[0]["content"][0]["text"]
    assert last[0]["role"] == "developer" and sent_first[:2000] == template[:2000]
    assert set(sent_first.splitlines()) <= set(template.splitlines())
    recorded = [without_ids(line["payload"]) for line in lines if line["type"] == "response_item"]
    sent = [without_ids(i) for i in last[1:]]  # the first item is the base instructions, kept in session_meta
    assert [i for i in sent if i not in recorded] == []
    assert sum(line["type"] == "turn_context" for line in lines) == 2


@pytest.mark.parametrize("remote", [False, True], ids=["local", "remote"])
def test_codex_compacts_with_a_small_window_and_the_rollout_says_so(tmp_path, remote):
    """Locally (a provider of its own): Codex asks the model for a summary. Remotely (a provider named
    OpenAI): its input ends with ``compaction_trigger`` and one ``compaction`` item comes back."""
    server, script, run = play(tmp_path, COMPACTING, remote_compaction=remote)
    assert script.summaries == 1 and server.responses.compactions == int(remote)
    bodies = [r["body"] for r in server.requests]
    asked = [n for n, b in enumerate(bodies) if asks_to_compact(b) or COMPACTION_ASK in json.dumps(b["input"][-1])]
    assert len(asked) == 1 and bodies[asked[0]]["stream"] is True
    after = bodies[asked[0] + 1]["input"]
    assert len(after) < len(bodies[asked[0]]["input"])  # the history replaced by its summary
    assert (run.workdir / "test_greet.py").exists() and run.stdout.strip().endswith(FINAL_FOLLOW_UP)
    (compacted,) = [line["payload"] for line in rollout_lines(run) if line["type"] == "compacted"]
    replacement = compacted["replacement_history"]
    assert [without_ids(i) for i in replacement] == [without_ids(i) for i in after[1 : len(replacement) + 1]]
    if remote:  # the summary is the compaction item's, opaque to Codex
        assert compacted["message"] == "" and replacement[-1]["type"] == "compaction"
    else:
        assert "reached step" in compacted["message"] and replacement[-1]["role"] == "user"
