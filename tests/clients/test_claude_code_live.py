"""The real Claude Code CLI through ctxweb's proxy (the shared stack of ``tests/clients/conftest.py``:
gunicorn, two workers × two recorder threads, a real Celery worker, Postgres), playing a scripted
coding task of 20+ requests with thinking, parallel tool calls, failing commands, large outputs,
deferred tools, tasks and a subagent, then compacting its own context (``/compact``) and going on.
One conversation must be one session, equal to ``ctx import`` of the transcript the CLI wrote,
before and after its compaction; its subagent a linked session; its STATUS the upstream's own count."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bench._server import Client, make_key
from tests.clients.claude_code import installed, run_claude
from tests.clients.conftest import Live
from tests.clients.stack import Stack, StoredSession, compact, ctx_import, first_difference, said, settled
from tests.conftest import need
from tests.fakes.coding_task import AFTER_COMPACT, COMPACT_SUMMARY, PROMPT, SUBAGENT_PROMPT, coding_task

pytestmark = [pytest.mark.services, pytest.mark.slow]

PROJECT = "claude code"
USAGE_KINDS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens")


def main_and_linked(proxied: list[StoredSession]) -> tuple[StoredSession, list[StoredSession]]:
    """The conversation's one session, and the sessions linked to it (its subagent's)."""
    main = [s for s in proxied if "sidechain_of" not in s.metadata]
    assert len(main) == 1 and main[0].parent_id is None, [(s.name, s.external_id, s.metadata) for s in proxied]
    linked = [s for s in proxied if s.metadata.get("sidechain_of") == main[0].id and s.parent_id is None]
    assert len(linked) == len(proxied) - 1
    return main[0], linked


def assert_equal_to_its_import(stack: Stack, main: StoredSession, transcript: Path, project: str) -> None:
    ctx_import(stack.env, transcript, project)
    imported = settled(stack.database_url, project, seconds=5)
    assert len(imported) == 1
    assert said(main) == said(imported[0]), first_difference(said(main), said(imported[0]))
    states = [meta.get("is_compact_summary", False) for _, _, meta in main.messages]
    assert states == [meta.get("is_compact_summary", False) for _, _, meta in imported[0].messages]


def checkpoint_after_compaction(api: Client, session_id: int) -> dict:
    """Summarize the session (a real Celery worker runs it) and return its checkpoint's data."""
    compact(api, session_id, "summarize")
    checkpoints = api.call("GET", f"/api/v1/sessions/{session_id}/checkpoints/")[1]
    return checkpoints["results"][0]["data"] if isinstance(checkpoints, dict) else checkpoints[0]["data"]


def test_claude_code_is_one_session_equal_to_its_transcript_before_and_after_it_compacts(live: Live, tmp_path, capsys):
    need(installed(), "node or the pinned Claude Code CLI is missing (make clients)")
    workdir, home = tmp_path / "project", tmp_path / "home"
    workdir.mkdir()
    home.mkdir()
    started = time.monotonic()
    task = coding_task(str(workdir))
    project, upstream, stack = live.project(PROJECT), live.anthropic, live.stack
    upstream.set_message_function(task)
    key = make_key(stack.env, live.user("claude"))
    api = Client(stack.hostport, key)
    assert api.call("POST", "/api/v1/projects/", {"name": project})[0] == 201
    base_url = f"{live.proxy}/anthropic"

    run = run_claude(base_url, "sk-upstream", workdir, home, ctxweb_key=key, prompt=PROMPT, timeout=300)
    assert run.returncode == 0, (run.stderr[-2000:], [str(e)[:1500] for e in run.events[-3:]])
    assert run.result().get("subtype") == "success" and run.result().get("is_error") is False
    assert (workdir / "squares.txt").read_text().split() == ["1", "1", "2", "4", "3", "9", "4", "16", "5", "25"]
    proxied = settled(stack.database_url, project)
    requests = upstream.requests_for("messages")
    main, linked = main_and_linked(proxied)
    transcripts = run.transcripts()
    assert len(transcripts) == 1, transcripts
    assert_equal_to_its_import(stack, main, transcripts[0], live.project("import before"))
    code, status = Client(stack.hostport, key).call("GET", f"/api/v1/sessions/{main.id}/status/")
    checkpoint = checkpoint_after_compaction(Client(stack.hostport, key), main.id)

    # Claude Code compacts its context itself, then goes on: the same session, still its import
    for prompt in ("/compact", AFTER_COMPACT):
        more = run_claude(base_url, "sk-upstream", workdir, home, ctxweb_key=key, prompt=prompt, resume=True)
        assert more.returncode == 0, more.stderr[-2000:]
    assert task.summaries >= 1
    after = settled(stack.database_url, project)
    main_after, linked_after = main_and_linked(after)
    assert main_after.id == main.id and len(main_after.messages) > len(main.messages)
    assert run.transcripts() == transcripts
    assert_equal_to_its_import(stack, main_after, transcripts[0], live.project("import after"))
    summary = [m for m in main_after.messages if m[2].get("is_compact_summary")]
    assert len(summary) == 1 and COMPACT_SUMMARY in str(summary[0][1])
    hits = live.hits()
    elapsed = time.monotonic() - started

    with capsys.disabled():
        print(f"\nClaude Code, {len(requests)} requests, {elapsed:.1f} s: the conversation "
              f"{len(main.messages)} messages, then {len(main_after.messages)} after its /compact; "
              f"{len(linked_after)} linked session(s)")  # fmt: skip

    # every request reached the upstream and was answered there; ctxweb never failed one
    assert task.played[PROMPT] >= 21 and task.played[SUBAGENT_PROMPT] >= 1, task.played
    assert hits and all(status < 500 for _, _, status in hits), hits
    answered = upstream.requests_for("messages")
    posts = [h for h in hits if h[0] == "POST" and h[1].split("?")[0].endswith("/v1/messages")]
    assert len(posts) == len(answered) and all(r["status"] == 200 for r in answered)
    assert "ctxweb-api-key" not in {k.lower() for r in answered for k in r["headers"]}
    # its subagent is a session linked to it, opened by the prompt the conversation gave it
    assert len(linked) == 1 and SUBAGENT_PROMPT in str(linked[0].messages[0][1])
    assert main.name.startswith(PROMPT[:40])

    # no note, no warning; STATUS exact and the upstream's own count of the conversation's last exchange
    assert all(s.rejections == 0 for s in after)
    assert not any("[ctxweb:" in str(content) for s in after for _, content, _ in s.messages)
    assert code == 200 and not status.get("warnings"), status
    usage = [r for r in requests if PROMPT in str(r["body"]["messages"][0])][-1]["usage"]
    assert status["token_source"] == "exact", status
    assert status["used"] == sum(usage.get(k) or 0 for k in USAGE_KINDS), (status, usage)

    # a compaction of it keeps the user's own words as the first request, not what the harness injected
    assert checkpoint["facts"]["first_request"] == PROMPT, checkpoint.get("facts")
