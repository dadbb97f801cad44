"""``ctxclient`` against a live server: every method once, and how errors come out (``ApiError`` with
status, code and detail; ``Unreachable`` when nothing answers)."""

from __future__ import annotations

import http.server
import socket
import threading

import pytest

from ctxclient import ApiError, Client, CtxError, Unreachable
from sessions_app.services import ingest
from tests.claude_code_lines import agent_session
from tests.conftest import make_persona
from tests.sessions_app.compaction_helpers import agent_rounds

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def ctx(transactional_db, live_server) -> Client:
    persona = make_persona("client-user")
    return Client(live_server.url, persona.key, timeout=30)


def work() -> list[dict]:
    """Ten rounds of tool calls with long outputs (something to compact), each with a client id."""
    return [{**m, "client_id": f"m{i}"} for i, m in enumerate(agent_rounds(10, output_lines=60))]


def test_every_method_against_a_live_server(ctx):
    project = ctx.project_create("Client project")
    assert [p["name"] for p in ctx.projects()] == ["Client project"]
    assert ctx.project_id("Client project") == ctx.project_id(str(project["id"])) == project["id"]

    assert ctx.session_find("Client project", "run-1") is None
    session = ctx.session_for("Client project", "run-1", name="fix the build", context_window=30_000)
    assert (session["external_id"], session["context_window"]) == ("run-1", 30_000)
    assert ctx.session_for(project["id"], "run-1")["id"] == session["id"]  # found, not made again
    assert ctx.session("run-1")["id"] == session["id"]  # a session by its external id
    assert ctx.session_update(session["id"], name="renamed")["name"] == "renamed"

    messages = work()
    answer = ctx.append(session["id"], messages)
    assert len(answer["messages"]) == len(messages) and answer["status"]["messages"] > 0
    again = ctx.append(session["id"], messages)  # a retry: the client ids make it store nothing twice
    assert [m["seq"] for m in again["messages"]] == [m["seq"] for m in answer["messages"]]
    one = ctx.append(session["id"], {"role": "user", "content": "and now?", "client_id": "last"})
    assert one["messages"][0]["seq"] == len(messages) + 1
    assert ctx.messages(session["id"], after_seq=len(messages))["results"][0]["content"] == "and now?"

    status = ctx.status(session["id"])
    assert status["context_window"] == 30_000 and status["used"] > 0
    context = ctx.context(session["id"], format="openai")
    assert context["messages"][0]["role"] in ("system", "user") and "status" in context
    counted = ctx.count([{"role": "user", "content": "Hello there"}], system="Be brief.")
    assert counted["input_tokens"] > 0 and counted["source"] in ("exact", "estimate")

    preview = ctx.compact(session["id"], dry_run=True)
    assert "tokens_before" in preview or "items" in preview
    record = ctx.compact(session["id"], level="compact")
    assert ctx.compaction(record["id"])["status"] == "succeeded"  # embedded mode: it ran already
    assert ctx.revert(record["id"])["status"] == "reverted"

    handoff = ctx.handoff(session["id"], continue_=True)
    assert handoff["id"] and ctx.session(session["id"])["status"] == "handed_off"
    assert "and now?" in ctx.handoff_download(handoff["id"], format="md")
    # The old session names its continuation, and an append follows it there.
    assert ctx.status(session["id"])["continued_in"] == handoff["continuation"]
    with pytest.raises(ApiError) as closed:
        ctx.append(session["id"], {"role": "user", "content": "still there?"}, follow=False)
    assert closed.value.code == "session_closed" and closed.value.data["continued_in"] == handoff["continuation"]
    carried = ctx.status(handoff["continuation"])["last_seq"]  # the handoff, then the protected messages
    followed = ctx.append(session["id"], {"role": "user", "content": "still there?", "client_id": "after"})
    assert followed["session"] == handoff["continuation"] and followed["messages"][0]["seq"] == carried + 1

    lines = agent_session(1).text()
    synced = ctx.upload_transcript(project["id"], "cc-1", lines, offset=0, final=True, name="cc")
    assert (synced["offset"], synced["messages"], synced["held_back"]) == (len(lines.encode()), 4, 0)
    assert ctx.session_find(project["id"], "cc-1")["id"] == synced["session"]


def test_errors_carry_status_code_and_detail(ctx):
    project = ctx.project_create("Errors")
    session = ctx.session_create(project["id"], name="s")
    with pytest.raises(ApiError) as missing:
        ctx.status(999_999)
    assert (missing.value.status, missing.value.code) == (404, "not_found") and missing.value.detail
    with pytest.raises(ApiError) as bad:
        ctx.append(session["id"], {"role": "robot", "content": "hi"})
    assert (bad.value.status, bad.value.code) == (400, "invalid_role")
    with pytest.raises(ApiError) as nameless:
        ctx.project_id("No such project")
    assert nameless.value.status == 404
    with pytest.raises(ApiError) as gap:
        ctx.upload_transcript(project["id"], "cc-gap", agent_session(1).text(), offset=10)
    assert (gap.value.status, gap.value.code, gap.value.data["expected_offset"]) == (409, "transcript_offset", 0)
    with pytest.raises(ApiError) as unauthorized:
        Client(ctx.base, "ctx_not-a-key-at-all-000000").projects()
    assert unauthorized.value.status == 401
    assert isinstance(unauthorized.value, CtxError) and not isinstance(unauthorized.value, Unreachable)


def test_a_server_that_does_not_answer_is_unreachable(transactional_db):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(Unreachable):
        Client(f"http://127.0.0.1:{port}", "ctx_x").status(1)

    class Down(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(503)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<h1>Service Unavailable</h1>")

        def log_message(self, *args: object) -> None:
            pass

    proxy = http.server.HTTPServer(("127.0.0.1", 0), Down)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        with pytest.raises(Unreachable, match="503"):
            Client(f"http://127.0.0.1:{proxy.server_port}", "ctx_x").status(1)
    finally:
        proxy.shutdown()
        proxy.server_close()


def test_the_client_is_standard_library_only():
    import ast
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    # compaction.status holds the STATUS type the client shares with the server: it must be stdlib-only too.
    shared = [root / "compaction" / "__init__.py", root / "compaction" / "status.py"]
    for path in [*(root / "ctxclient").glob("*.py"), *shared]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else []
            )
            for name in names:
                if name == "compaction.status" and path.parent.name == "ctxclient":
                    continue
                assert name.split(".")[0] in sys.stdlib_module_names, f"{path.name} imports {name}"
    assert ingest  # the server side of these tests is the real one


def test_the_readme_example_runs(ctx, live_server):
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## Connecting agents", 1)[1]
    code = section.split("```python", 1)[1].split("```", 1)[0]
    ctx.project_create("my agent")
    scope: dict = {"api_key": ctx.api_key}
    exec(code.replace("http://127.0.0.1:8000", live_server.url), scope)
    assert scope["answer"]["messages"][0]["seq"] == 1 and scope["request"]["messages"]
