"""The real Claude Code CLI through ctxweb's proxy (``tests.clients.stack``: gunicorn, two workers ×
two recorder threads, a real Celery worker, Postgres), playing a scripted coding task of 20+ requests
with thinking, parallel tool calls, failing commands, large outputs, deferred tools, tasks and a
subagent. One conversation must be one session, equal to ``ctx import`` of the transcript the CLI
wrote, its subagent a linked child session, its STATUS the upstream's own count."""

from __future__ import annotations

import time

import pytest

from bench._server import Client, make_key
from sessions_app.services.proxy_messages import identity
from tests.clients.claude_code import installed, run_claude
from tests.clients.stack import StoredSession, access_log, ctx_import, ctxweb_stack, settled
from tests.conftest import need
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.coding_task import PROMPT, SUBAGENT_PROMPT, coding_task

pytestmark = [pytest.mark.services, pytest.mark.slow]


def said(session: StoredSession) -> list[tuple[str, object]]:
    """A session's messages as what they say (``cache_control`` and the string/blocks form aside)."""
    return [(role, identity(content)) for role, content, _ in session.messages]


def checkpoint_after_compaction(api: Client, session_id: int) -> dict:
    """Summarize the session (a real Celery worker runs it) and return its checkpoint's data."""
    code, compaction = api.call("POST", f"/api/v1/sessions/{session_id}/compactions/", {"level": "summarize"})
    assert code == 202, compaction
    deadline = time.monotonic() + 60
    while compaction["status"] in ("queued", "running") and time.monotonic() < deadline:
        time.sleep(0.5)
        compaction = api.call("GET", f"/api/v1/compactions/{compaction['id']}/")[1]
    assert compaction["status"] == "succeeded", compaction
    checkpoints = api.call("GET", f"/api/v1/sessions/{session_id}/checkpoints/")[1]
    return checkpoints["results"][0]["data"] if isinstance(checkpoints, dict) else checkpoints[0]["data"]


def test_claude_code_is_one_session_equal_to_its_transcript(tmp_path, capsys):
    need(installed(), "node or the pinned Claude Code CLI is missing (make clients)")
    workdir, home = tmp_path / "project", tmp_path / "home"
    workdir.mkdir()
    home.mkdir()
    started = time.monotonic()
    task = coding_task(str(workdir))
    with FakeAnthropic() as upstream, ctxweb_stack("claude_code", upstream.base_url, tmp_path) as stack:
        upstream.set_message_function(task)
        key = make_key(stack.env, "claude")
        assert Client(stack.hostport, key).call("POST", "/api/v1/projects/", {"name": "claude code"})[0] == 201
        run = run_claude(
            f"http://{stack.hostport}/proxy/anthropic", "sk-upstream", workdir, home, ctxweb_key=key,
            prompt=PROMPT, timeout=300,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr[-2000:]
        assert run.result().get("subtype") == "success" and run.result().get("is_error") is False
        assert (workdir / "squares.txt").read_text().split() == ["1", "1", "2", "4", "3", "9", "4", "16", "5", "25"]

        proxied = settled(stack.database_url, "claude code")
        requests = upstream.requests_for("messages")
        hits = access_log(stack.access_log)
        api = Client(stack.hostport, key)
        statuses = {s.id: api.call("GET", f"/api/v1/sessions/{s.id}/status/") for s in proxied}
        checkpoint = checkpoint_after_compaction(api, next(s.id for s in proxied if "sidechain_of" not in s.metadata))
        transcripts = run.transcripts()
        assert len(transcripts) == 1, transcripts
        ctx_import(stack.env, transcripts[0], "claude code import")
        imported = settled(stack.database_url, "claude code import", seconds=5)
    elapsed = time.monotonic() - started

    with capsys.disabled():
        print(f"\nClaude Code, {len(requests)} requests, {elapsed:.1f} s: proxy sessions "
              f"{[(s.name[:40], len(s.messages), s.metadata) for s in proxied]}; "
              f"import {[(s.name[:40], len(s.messages)) for s in imported]}")  # fmt: skip

    # every request reached the upstream and was answered there; ctxweb never failed one
    assert task.played[PROMPT] >= 21 and task.played[SUBAGENT_PROMPT] >= 1, task.played
    assert hits and all(status < 500 for _, _, status in hits), hits
    posts = [h for h in hits if h[0] == "POST" and h[1].split("?")[0].endswith("/v1/messages")]
    assert len(posts) == len(requests) and all(r["status"] == 200 for r in requests)
    assert "ctxweb-api-key" not in {k.lower() for r in requests for k in r["headers"]}

    # one session for the conversation, its subagent a child linked to it
    main = [s for s in proxied if "sidechain_of" not in s.metadata]
    assert len(main) == 1 and main[0].parent_id is None, [(s.name, s.external_id, s.metadata) for s in proxied]
    children = [s for s in proxied if s.metadata.get("sidechain_of") == main[0].id and s.parent_id is None]
    assert len(children) == len(proxied) - 1 >= 1
    assert any(SUBAGENT_PROMPT in str(c.messages[0][1]) for c in children)
    assert main[0].name == PROMPT[: len(main[0].name)].rstrip("…") or main[0].name.startswith(PROMPT[:40])

    # equal to the import of the transcript the CLI wrote: same order, same content
    assert len(imported) == 1
    assert said(main[0]) == said(imported[0]), first_difference(said(main[0]), said(imported[0]))

    # no note, no warning; STATUS exact and the upstream's own count of the last exchange
    assert all(s.rejections == 0 for s in proxied)
    assert not any("[ctxweb:" in str(content) for s in proxied for _, content, _ in s.messages)
    code, status = statuses[main[0].id]
    assert code == 200 and not status.get("warnings"), status
    usage = [r for r in requests if PROMPT in str(r["body"]["messages"][0])][-1]["usage"]
    assert status["token_source"] == "exact", status
    assert status["used"] == sum(
        usage.get(k) or 0
        for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens")
    ), (status, usage)

    # a compaction of it keeps the user's own words as the first request, not what the harness injected
    assert checkpoint["facts"]["first_request"] == PROMPT, checkpoint.get("facts")


def first_difference(proxied: list, imported: list) -> str:
    for n, (a, b) in enumerate(zip(proxied, imported, strict=False)):
        if a != b:
            return f"message {n + 1}: proxy {str(a)[:300]!r} / import {str(b)[:300]!r}"
    return f"proxy {len(proxied)} messages, import {len(imported)}"
