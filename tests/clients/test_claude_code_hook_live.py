"""The real Claude Code CLI with both ctxweb's proxy and its hook on (a user who followed both pages
of the docs): the hook uploads the transcript as Claude Code writes it, the proxy records every
request, and the user sees one session, the proxy's, equal to the import of the transcript."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bench._server import ROOT, Client, make_key
from tests.clients.claude_code import CONTENT, installed, run_claude
from tests.clients.conftest import Live
from tests.clients.stack import settled
from tests.clients.test_claude_code_live import assert_equal_to_its_import
from tests.conftest import need
from tests.fakes.scripted_model import ScriptedModel, file_writing_task

pytestmark = [pytest.mark.services, pytest.mark.slow]

PROJECT = "claude code"
HOOK_EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse", "PreCompact", "Stop", "SessionEnd")


def hook_settings(home: Path, url: str, key: str, project: str) -> Path:
    """Claude Code's settings.json with ctxweb's hook on every event, as the hook's README shows."""
    command = f"{sys.executable} {ROOT / 'integrations' / 'claude_code' / 'hook.py'}"
    entry = [{"hooks": [{"type": "command", "command": command}]}]
    settings = {
        "env": {"CTX_URL": url, "CTX_API_KEY": key, "CTX_PROJECT": project, "CTX_STATE_DIR": str(home / "ctx-state")},
        "hooks": {event: [{**entry[0], "matcher": "*"}] if event == "PostToolUse" else entry for event in HOOK_EVENTS},
    }
    path = home / ".claude" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings))
    return path


def test_proxy_and_hook_together_one_session(live: Live, tmp_path):
    need(installed(), "node or the pinned Claude Code CLI is missing (make clients)")
    workdir, home = tmp_path / "project", tmp_path / "home"
    workdir.mkdir()
    home.mkdir()
    stack, project = live.stack, live.project(PROJECT)
    live.anthropic.set_message_function(ScriptedModel(file_writing_task(str(workdir), content=CONTENT)))
    key = make_key(stack.env, live.user("claude"))
    assert Client(stack.hostport, key).call("POST", "/api/v1/projects/", {"name": project})[0] == 201
    hook_settings(home, f"http://{stack.hostport}", key, project)
    run = run_claude(f"{live.proxy}/anthropic", "sk-upstream", workdir, home, ctxweb_key=key)
    assert run.returncode == 0, run.stderr[-2000:]
    assert (workdir / "result.txt").read_text() == CONTENT
    sessions = settled(stack.database_url, project)
    log = home / "ctx-state" / "hook.log"
    assert not log.exists() or not log.read_text().strip(), log.read_text()  # the hook never failed
    (transcript,) = run.transcripts()
    assert len(sessions) == 1, [(s.name, s.external_id, s.metadata) for s in sessions]
    (session,) = sessions
    # the hook uploaded the whole transcript into that session, which took no message from it
    cursor = session.metadata.get("transcript", {})
    assert cursor.get("offset") == transcript.stat().st_size, cursor
    assert session.metadata["source"] == "proxy" and session.rejections == 0
    assert_equal_to_its_import(stack, session, transcript, live.project("import"))


def newest_read(transcript: Path) -> tuple[str, int]:
    """The id of the transcript's newest response and what its model read (input + cache write +
    cache read, its last line's usage), from the JSONL as Claude Code wrote it."""
    found: dict[str, int] = {}
    for raw in transcript.read_text().splitlines():
        event = json.loads(raw) if raw.startswith("{") else {}
        body = event.get("message") if event.get("type") == "assistant" else None
        if isinstance(body, dict) and isinstance(body.get("usage"), dict) and body.get("model") != "<synthetic>":
            usage = body["usage"]
            found.pop(body["id"], None)  # re-inserted: the newest last
            found[body["id"]] = sum(usage.get(k) or 0 for k in CONTEXT_KINDS)
    return list(found.items())[-1]


CONTEXT_KINDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def test_the_hook_alone_counts_the_session_by_claude_codes_own_usage(live: Live, tmp_path):
    """Claude Code straight to its provider, only the hook recording: STATUS is ``exact``, the newest
    response's input and cache tokens, as the import of the same transcript says."""
    need(installed(), "node or the pinned Claude Code CLI is missing (make clients)")
    workdir, home = tmp_path / "project", tmp_path / "home"
    workdir.mkdir()
    home.mkdir()
    stack, project = live.stack, live.project("hook only")
    live.anthropic.set_message_function(ScriptedModel(file_writing_task(str(workdir), content=CONTENT)))
    key = make_key(stack.env, live.user("hooked"))
    assert Client(stack.hostport, key).call("POST", "/api/v1/projects/", {"name": project})[0] == 201
    hook_settings(home, f"http://{stack.hostport}", key, project)
    run = run_claude(live.anthropic.base_url, "sk-upstream", workdir, home)
    assert run.returncode == 0, run.stderr[-2000:]
    (transcript,) = run.transcripts()
    (session,) = settled(stack.database_url, project)
    assert session.metadata.get("transcript", {}).get("offset") == transcript.stat().st_size
    _, read = newest_read(transcript)
    status = Client(stack.hostport, key).call("GET", f"/api/v1/sessions/{session.id}/status/")[1]
    assert (status["token_source"], status["used"]) == ("exact", read), status
    assert_equal_to_its_import(stack, session, transcript, live.project("import"))
