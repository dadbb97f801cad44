"""The real Claude Code CLI given ctxweb's MCP server (``--mcp-config``, an HTTP server with its
ctxweb API key) and working through ctxweb's proxy with transparent compaction: it reads a large file,
the session is compacted (the output cleared behind a placeholder naming ``recall m<seq>``), and in its
next turn the scripted model calls ``recall`` with the id the placeholder shows. Claude Code must get
the original bytes back from ctxweb and hand them to the model; ctxweb must record the call in the
session (docs/SEARCH.md, "The agent asks")."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest

from bench._server import Client, make_key
from tests.clients.claude_code import installed, run_claude
from tests.clients.conftest import Live
from tests.clients.stack import compact, settled
from tests.conftest import need
from tests.fakes.scripted_model import is_main_conversation, text, thinking, tool_use

pytestmark = [pytest.mark.services, pytest.mark.slow]

READ = "Show me what big.txt in the working directory says."
ASK = "What exactly did big.txt say on its line 137? Quote it."
PLACEHOLDER = re.compile(r"recall (m\d+) or revert restores")
CAT = tool_use("Bash", {"command": "cat big.txt", "description": "Show the file"}, key="mcp-cat")
ECHO = tool_use("Bash", {"command": "echo checked", "description": "Note it"}, key="mcp-echo")
RECALL_ID = tool_use("mcp__ctxweb__recall", {}, key="mcp-recall")["id"]
POLICY = {"proxy_compaction": True, "keep_recent_turns": 0}


def big_file() -> str:
    """About 20 KB of lines no other text holds (a compaction clears it whole)."""
    return "".join(
        f"line {i}: the gauge on valve {i * 7 % 97} read {i * 13 % 101} kilopascals at dawn\n" for i in range(300)
    )


@dataclass
class RecallingModel:
    """Run 1: cat the file, then say so. Run 2: call ctxweb's ``recall`` with the id the compacted
    context's placeholder shows, then answer with what came back."""

    asked: list[str] = field(default_factory=list)
    recalled: list[str] = field(default_factory=list)
    placeholders_missing: int = 0

    def __call__(self, body: Mapping[str, Any]) -> dict[str, Any]:
        if not is_main_conversation(body):
            return {"content": [text("Scripted answer to a side request.")], "stop_reason": "end_turn"}
        messages = body["messages"]
        last = messages[-1]
        blocks = last["content"] if isinstance(last["content"], list) else []
        answer = next((b for b in blocks if isinstance(b, dict) and b.get("tool_use_id") == RECALL_ID), None)
        if answer is not None:
            self.recalled.append(_text_of(answer.get("content")))
            return {"content": [text("Line 137, as recalled.")], "stop_reason": "end_turn"}
        if CAT["id"] in json.dumps(last):  # one more step: the file's output is not the newest result
            return {"content": [ECHO]}
        if ECHO["id"] in json.dumps(last):
            return {"content": [text("The file lists gauge readings.")], "stop_reason": "end_turn"}
        if ASK in json.dumps(last):
            found = PLACEHOLDER.search(json.dumps(messages))
            if found is None:
                self.placeholders_missing += 1
                return {"content": [text("No placeholder to recall.")], "stop_reason": "end_turn"}
            self.asked.append(found.group(1))
            recall = tool_use("mcp__ctxweb__recall", {"id": found.group(1)}, key="mcp-recall")
            return {"content": [thinking("The file's output was cleared; recall it."), recall]}
        return {"content": [thinking("Show the file."), text("I'll show the file."), CAT]}


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


def mcp_calls(database_url: str, session_id: int) -> list[tuple[str, str, bool, int]]:
    with psycopg.connect(database_url) as conn:
        return conn.execute(
            "SELECT tool, asked, found, chars FROM sessions_app_mcpcall WHERE session_id = %s ORDER BY id",
            (session_id,),
        ).fetchall()


def test_claude_code_recalls_the_original_behind_a_placeholder_through_ctxwebs_mcp_server(live: Live, tmp_path):
    need(installed(), "node or the pinned Claude Code CLI is missing (make clients)")
    workdir, home = tmp_path / "project", tmp_path / "home"
    workdir.mkdir()
    home.mkdir()
    original = big_file()
    (workdir / "big.txt").write_text(original)
    model = RecallingModel()
    live.anthropic.set_message_function(model)
    project, stack = live.project("mcp recall"), live.stack
    key = make_key(stack.env, live.user("recaller"))
    api = Client(stack.hostport, key)
    status, created = api.call("POST", "/api/v1/projects/", {"name": project})
    assert status == 201, created
    assert api.call("PATCH", f"/api/v1/projects/{created['id']}/policy/", POLICY)[0] == 200
    base_url = f"{live.proxy}/anthropic"
    servers = {"ctxweb": {"type": "http", "url": f"http://{stack.hostport}/mcp/",
                          "headers": {"Authorization": f"Bearer {key}"}}}  # fmt: skip

    first = run_claude(base_url, "sk-upstream", workdir, home, ctxweb_key=key, prompt=READ, mcp_servers=servers)
    assert first.returncode == 0, first.stderr[-2000:]
    (session,) = settled(stack.database_url, project)
    api = Client(stack.hostport, key)  # a connection of its own: gunicorn closed the idle one
    compact(api, session.id, "compact")

    second = run_claude(
        base_url, "sk-upstream", workdir, home, ctxweb_key=key, prompt=ASK, resume=True, mcp_servers=servers
    )
    assert second.returncode == 0, second.stderr[-2000:]
    assert second.result().get("subtype") == "success", second.result()

    # The model saw the placeholder, asked for what it names, and got the file back byte for byte.
    assert model.placeholders_missing == 0 and len(model.asked) == 1, model
    assert len(model.recalled) == 1 and original.rstrip("\n") in model.recalled[0], model.recalled[0][:500]
    # One conversation, one session; the call recorded in it.
    (after,) = settled(stack.database_url, project)
    assert after.id == session.id
    ((tool, asked, found, chars),) = mcp_calls(stack.database_url, session.id)
    assert (tool, asked, found) == ("recall", model.asked[0], True) and chars >= len(original.rstrip("\n"))
