"""The real Codex CLI through ctxweb's proxy (the shared stack of ``tests/clients/conftest.py``: gunicorn,
two workers × two recorder threads, a real Celery worker, Postgres), playing the scripted coding task
of ``tests/fakes/scripted_codex.py`` over two user turns (``exec``, then ``exec resume --last``) on the
Responses API. Its thread must be one session keyed by Codex's session id, equal to ``ctx import
--format codex`` of the rollout file Codex wrote, with STATUS the upstream's own count of the last
exchange (docs/PROXY.md, "The Responses API (Codex)")."""

from __future__ import annotations

import json
import time

import pytest

from bench._server import Client, make_key
from tests.clients.codex import COMPACTING, installed, run_codex
from tests.clients.conftest import Live
from tests.clients.stack import ctx_import, first_difference, said, settled
from tests.conftest import need
from tests.fakes.scripted_codex import FINAL_FOLLOW_UP, FOLLOW_UP, PROMPT, ScriptedCodex, turns

pytestmark = [pytest.mark.services, pytest.mark.slow]

RESPONSES = "/proxy/openai/v1/responses"


@pytest.mark.parametrize(
    ("codex_config", "remote"), [(None, False), (COMPACTING, False), (COMPACTING, True)],
    ids=["plain", "compacting", "compacting-remotely"],
)  # fmt: skip
def test_codex_thread_is_one_session_equal_to_its_rollout(live: Live, tmp_path, capsys, codex_config, remote):
    """With a small window Codex compacts its history itself once (locally, or by the provider: its
    provider named OpenAI): the thread is still one session equal to its rollout's import."""
    need(installed(), "node or the pinned Codex CLI is missing (make clients)")
    workdir, home = tmp_path / "project", tmp_path / "home"
    workdir.mkdir()
    project, imported_into = live.project("codex"), live.project("codex import")
    started = time.monotonic()
    script = ScriptedCodex()
    live.openai.responses.set_responder(script)
    key = make_key(live.stack.env, live.user("codex"))
    assert Client(live.stack.hostport, key).call("POST", "/api/v1/projects/", {"name": project})[0] == 201
    headers = {"ctxweb-api-key": key, "ctxweb-project": project}
    for prompt, resume in ((PROMPT, False), (FOLLOW_UP, True)):
        run = run_codex(f"{live.proxy}/openai", workdir, home, prompt, resume=resume, headers=headers,
                        api_key="sk-upstream", settings=codex_config, remote_compaction=remote)  # fmt: skip
        assert run.returncode == 0, run.stderr[-3000:]
    proxied = settled(live.stack.database_url, project)
    status_code, status = Client(live.stack.hostport, key).call("GET", f"/api/v1/sessions/{proxied[0].id}/status/")
    (rollout,) = run.rollouts()
    ctx_import(live.stack.env, rollout, imported_into, format="codex")
    imported = settled(live.stack.database_url, imported_into, seconds=5)
    requests, answered = live.openai.requests, live.openai.responses.answered
    hits = live.hits()
    elapsed = time.monotonic() - started

    with capsys.disabled():
        print(f"\nCodex through the proxy, {len(requests)} requests, {elapsed:.1f} s: "
              f"{len(proxied[0].messages)} messages")  # fmt: skip

    # Codex did its task, every step of it through the proxy and answered upstream
    assert (workdir / "greet.py").read_text() == "print('hello from codex')\n"
    assert (workdir / "test_greet.py").exists() and run.stdout.strip().endswith(FINAL_FOLLOW_UP)
    steps = sum(len(s) for s in turns().values())
    compacted = int(codex_config is not None)  # one request more: the compaction's
    assert len(requests) == len(answered) == steps + 2 + compacted and script.side_requests == 0
    assert script.summaries == compacted
    assert all(r["path"] == "/v1/responses" for r in requests)
    assert all(r["headers"]["authorization"] == "Bearer sk-upstream" for r in requests)
    assert "ctxweb-api-key" not in {k for r in requests for k in r["headers"]}
    posts = [h for h in hits if h[:2] == ("POST", RESPONSES)]
    assert len(posts) == len(requests) and all(status == 200 for _, _, status in posts), posts
    assert all(status < 400 for _, _, status in hits), hits

    # one session for the thread, keyed by Codex's session id, equal to the import of its rollout
    thread = json.loads(rollout.read_text().splitlines()[0])["payload"]["id"]
    assert {r["headers"]["session-id"] for r in requests} == {thread}
    assert len(proxied) == 1, [(s.name, s.external_id, s.metadata) for s in proxied]
    (session,) = proxied
    assert session.external_id == thread and session.parent_id is None
    assert session.name.startswith(PROMPT[:40]), session.name  # the user's words, not Codex's environment
    assert len(imported) == 1
    assert said(session) == said(imported[0]), first_difference(said(session), said(imported[0]))
    assert session.rejections == 0 and imported[0].rejections == 0 and session.unrecorded == 0
    assert not any("[ctxweb:" in str(content) for _, content, _ in session.messages)

    # STATUS: exact, the upstream's count of the last exchange (its input, cached part included, and output)
    usage = answered[-1]["usage"]
    assert status_code == 200 and status["warnings"] == [], status
    assert status["token_source"] == "exact", status
    assert status["used"] == usage["input_tokens"] + usage["output_tokens"], (status, usage)
