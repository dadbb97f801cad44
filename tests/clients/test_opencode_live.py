"""The real OpenCode CLI through ctxweb's proxy (the shared stack of ``tests/clients/conftest.py``:
gunicorn, two workers × two recorder threads, a real Celery worker, Postgres), playing a scripted
coding task of 12 requests with parallel tool calls, failing tools and a large output. OpenCode must
finish its task; its conversation must be one session, keyed by OpenCode's session id, holding every
message it sent and the last answer, with STATUS exact; its title request a session linked to it
(docs/PROXY.md, "OpenCode")."""

from __future__ import annotations

import math
import time

import pytest

from bench._server import Client, make_key
from sessions_app.services.proxy.messages import identity
from tests.clients.conftest import Live
from tests.clients.opencode import CONTENT, installed, run_opencode
from tests.clients.stack import settled
from tests.conftest import need
from tests.fakes.anthropic_server import default_count_tokens
from tests.fakes.scripted_model import FINAL_REPLY, SIDE_REPLY, ScriptedModel, text
from tests.fakes.scripted_opencode import coding_task, is_opencode_main

pytestmark = [pytest.mark.services, pytest.mark.slow]

PROJECT = "opencode"


def test_opencode_finishes_its_task_through_the_proxy_as_one_session(live: Live, tmp_path, capsys):
    need(installed(), "the pinned OpenCode CLI is missing (make clients)")
    workdir, home = tmp_path / "project", tmp_path / "home"
    workdir.mkdir()
    home.mkdir()
    started = time.monotonic()
    model = ScriptedModel(coding_task(str(workdir), content=CONTENT), is_main=is_opencode_main)
    upstream, stack, project = live.anthropic, live.stack, live.project(PROJECT)
    upstream.set_message_function(model)
    key = make_key(stack.env, live.user("opencode"))
    assert Client(stack.hostport, key).call("POST", "/api/v1/projects/", {"name": project})[0] == 201
    run = run_opencode(f"{live.proxy}/anthropic", "sk-upstream", workdir, home, ctxweb_key=key)
    assert run.returncode == 0, run.stderr[-2000:]
    proxied = settled(stack.database_url, project)
    api = Client(stack.hostport, key)  # (the first connection idled past gunicorn's keep-alive)
    statuses = {s.id: api.call("GET", f"/api/v1/sessions/{s.id}/status/") for s in proxied}
    hits = live.hits()
    elapsed = time.monotonic() - started

    # OpenCode did its task: every step ended, the last with the model's answer
    assert (workdir / "result.txt").read_text() == CONTENT
    assert run.finished() == ["tool-calls"] * len(model.turns) + ["stop"], run.finished()
    (opencode_session,) = run.session_ids()
    requests = upstream.requests_for("messages")
    main = [r["body"] for r in requests if is_opencode_main(r["body"])]
    assert len(main) == len(model.turns) + 1 >= 10 and len(requests) == len(main) + model.side_requests
    assert hits and all(status < 500 for _, _, status in hits), hits
    assert "ctxweb-api-key" not in {k.lower() for r in requests for k in r["headers"]}

    # one session for the conversation, holding all of it; the title request's linked to it
    conversations = [s for s in proxied if "sidechain_of" not in s.metadata]
    assert len(conversations) == 1, [(s.name, s.external_id, s.metadata) for s in proxied]
    session = conversations[0]
    assert session.external_id == opencode_session and session.parent_id is None
    # (``opencode run`` sends an argument holding a space in double quotes: the user's words as it sent them)
    assert session.name.startswith("\"Write the line 'hello from ctxweb'")
    assert [(role, identity(content)) for role, content, _ in session.messages] == [
        (m["role"], identity(m["content"])) for m in main[-1]["messages"]
    ] + [("assistant", identity([text(FINAL_REPLY)]))]
    sides = [s for s in proxied if s is not session]
    assert len(sides) == model.side_requests == 1
    assert all(s.metadata["sidechain_of"] == session.id and s.parent_id is None for s in sides), sides
    assert all(s.external_id.startswith(f"{opencode_session}#") for s in sides)
    assert identity(sides[0].messages[-1][1]) == identity([text(SIDE_REPLY)])
    assert all(s.rejections == 0 for s in proxied)
    notes = [c for s in proxied for _, c, _ in s.messages if "[ctxweb: " in str(c)]
    assert notes == []

    # STATUS: exact, the upstream's count of the last request and the answer's output
    code, status = statuses[session.id]
    assert code == 200 and status["warnings"] == [], status
    assert status["token_source"] == "exact" and status["message_count"] == len(session.messages)
    assert status["used"] == default_count_tokens(main[-1]) + math.ceil(len(FINAL_REPLY.encode()) / 4)
    assert all(code == 200 and s["warnings"] == [] for code, s in statuses.values())
    with capsys.disabled():
        figures = {"requests": len(requests), "main": len(main), "sessions": len(proxied)}
        print(f"\nOpenCode through the proxy: {figures}, {elapsed:.1f} s")
        print([(s.id, s.name[:40], s.external_id[:40], s.metadata, len(s.messages)) for s in proxied])
