"""The Claude Code hook against a live server: every shared transcript replayed through it, in random
pieces (lines cut in the middle, runs repeated, its state or the server's copy lost on the way), ends up
equal to a one-shot ``ctx import`` of the file; an unreachable server, partial lines, warnings."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.core.management import call_command

from sessions_app.models import AgentSession, Compaction, Message, TranscriptChunk
from sessions_app.selectors import usage
from sessions_app.services import agent_sessions, handoffs, importing, projects
from tests.claude_code_lines import agent_session
from tests.conftest import make_persona
from tests.shared_data import SHARED_DATA
from tests.transcript_blobs import BlobWriter, reminder
from tests.transcript_stream import text_block, tool_block

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
HOOK = ROOT / "integrations" / "claude_code" / "hook.py"
# As Claude Code runs it: the system's python3, outside the virtualenv (CTX_HOOK_PYTHON=python3.8 checks an old one).
PYTHON = os.environ.get("CTX_HOOK_PYTHON") or shutil.which("python3") or sys.executable
FILES = sorted(p.name for p in (SHARED_DATA / "claude_code").glob("*.jsonl")) or ["<shared data missing>"]

_spec = importlib.util.spec_from_file_location("ctx_claude_code_hook", HOOK)
assert _spec is not None and _spec.loader is not None
hook = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hook)


class Agent:
    """A Claude Code session writing its transcript, with the hook configured for one project."""

    def __init__(self, tmp_path: Path, url: str, key: str, project: str, session_id: str, name: str = "t") -> None:
        self.transcript = tmp_path / f"{name}.jsonl"
        self.transcript.write_bytes(b"")
        self.session_id = session_id
        self.env = {
            "CTX_URL": url,
            "CTX_API_KEY": key,
            "CTX_PROJECT": project,
            "CTX_STATE_DIR": str(tmp_path / "state"),
            "CTX_CHECKPOINT": "0",
            "CTX_TIMEOUT": "30",
        }

    def write(self, data: bytes) -> None:
        with open(self.transcript, "ab") as f:
            f.write(data)

    def event(self, name: str) -> str:
        return json.dumps(
            {
                "session_id": self.session_id,
                "transcript_path": str(self.transcript),
                "hook_event_name": name,
                "cwd": str(self.transcript.parent),
            }
        )

    def run(self, name: str = "PostToolUse") -> str:
        """The hook in-process (fast); what it printed."""
        out = io.StringIO()
        assert hook.main(self.event(name), self.env, out) == 0
        return out.getvalue()

    def run_process(self, name: str = "PostToolUse") -> subprocess.CompletedProcess:
        """The hook as Claude Code runs it."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("CTX_")}
        env.update(self.env)
        return subprocess.run(
            [PYTHON, str(HOOK)], input=self.event(name), env=env, capture_output=True, text=True, timeout=60
        )

    def state(self) -> dict:
        files = list((Path(self.env["CTX_STATE_DIR"])).glob("*.json"))
        return json.loads(files[0].read_text()) if files else {}


@pytest.fixture
def owner(transactional_db):
    persona = make_persona("agent-owner")
    project = projects.project_create(user=persona.user, name="Hooked")
    reference = projects.project_create(user=persona.user, name="Imported")
    for p in (project, reference):  # compare what was stored, not what a compaction made of it
        p.policy.auto = False
        p.policy.save()
    return persona, project, reference


def snapshot(session: AgentSession) -> dict:
    session.refresh_from_db()
    return {
        "messages": list(
            Message.objects.filter(session=session)
            .order_by("seq")
            .values_list("seq", "role", "content", "tokens", "client_id", "state", "metadata", "created_at")
        ),
        "session": {
            name: getattr(session, name)
            for name in (
                "name",
                "model",
                "system_prompt",
                "tools",
                "last_seq",
                "message_count",
                "active_message_count",
                "message_tokens",
                "system_tokens",
                "tool_tokens",
            )
        },
        # Not when it was counted: the two sessions were recorded at different times.
        "status": {k: v for k, v in usage.session_status(session).items() if k != "counted_at"},
    }


def turn_ends(data: bytes) -> list[int]:
    """Line ends after which the agent stops for its user: the next line is a prompt of the main chain."""
    ends, pos, main_chain = [], 0, None
    for line in data.splitlines(keepends=True):
        pos += len(line)
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict) or event.get("type") not in ("user", "assistant"):
            continue
        if main_chain is None:
            main_chain = event.get("isSidechain") is True
        content = (event.get("message") or {}).get("content")
        is_prompt = event["type"] == "user" and not (
            isinstance(content, list)
            and content
            and all(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
        )
        if is_prompt and (event.get("isSidechain") is True) == main_chain:
            ends.append(pos - len(line))
    return [e for e in ends if e > 0]


@pytest.mark.data
@pytest.mark.services
@pytest.mark.parametrize("name", FILES)
def test_replaying_a_transcript_through_the_hook_equals_an_import(
    shared_data, owner, live_server, celery_worker, tmp_path, name
):
    """On Postgres, with a real worker taking whatever the appends queue. A final event (Stop,
    PreCompact, SessionEnd) comes at turn ends and anywhere else too: in the middle of a response whose
    parallel tool calls are still being written, as when the hook reads the file while Claude Code
    appends to it."""
    persona, project, reference = owner
    path = shared_data / "claude_code" / name
    data = path.read_bytes()
    rng = random.Random(f"hook:{name}")
    # Cut points: random bytes (mostly in the middle of a line), plus a few turn ends where the agent stops.
    stops = set(rng.sample(turn_ends(data), min(2, len(turn_ends(data)))))
    cuts = [*sorted(set(rng.sample(range(1, len(data)), rng.randint(3, 10))) | stops), len(data)]
    agent = Agent(tmp_path, live_server.url, persona.key, project.name, f"cc-{path.stem}", name=path.stem)
    as_process = rng.randrange(len(cuts))
    start = 0
    for i, end in enumerate(cuts):
        agent.write(data[start:end])
        start = end
        if rng.random() < 0.15 and (synced := AgentSession.objects.filter(external_id=agent.session_id).first()):
            TranscriptChunk.objects.filter(session=synced).delete()  # the server loses its copy: the hook resends it
        if rng.random() < 0.1:
            for f in Path(agent.env["CTX_STATE_DIR"]).glob("*.json"):
                f.unlink()  # the hook loses its state: it starts from the top, the server ignores what it has
        if end in stops or end == len(data) or rng.random() < 0.3:
            event = rng.choice(["Stop", "PreCompact", "SessionEnd"])
        else:
            event = rng.choice(["PostToolUse", "UserPromptSubmit"])
        if i == as_process:
            done = agent.run_process(event)
            assert (done.returncode, done.stderr) == (0, ""), done.stderr
        else:
            agent.run(event)
        if rng.random() < 0.3:
            agent.run(event)  # the same event twice: nothing new, nothing stored twice
    assert agent.state()["file_pos"] == len(data)

    out = io.StringIO()
    call_command(
        "ctx", "import", str(path), "--format", "claude-code", "--project", str(reference.pk), "--json", stdout=out
    )
    result = json.loads(out.getvalue())
    synced = AgentSession.objects.get(project=project, external_id=agent.session_id)
    imported = AgentSession.objects.get(pk=result["session"])
    assert snapshot(synced) == snapshot(imported)
    # sub-agents: one session each, as the import makes them
    sides = {s.name: s for s in AgentSession.objects.filter(project=project).exclude(pk=synced.pk)}
    imported_sides = [AgentSession.objects.get(pk=pk) for pk in result["sidechains"]]
    assert sorted(sides) == sorted(s.name for s in imported_sides)
    for side in imported_sides:
        assert snapshot(sides[side.name]) == snapshot(side)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_server_down_exits_0_quietly_and_the_next_run_catches_up(owner, live_server, tmp_path):
    persona, project, reference = owner
    data = agent_session(3).text().encode()
    agent = Agent(tmp_path, f"http://127.0.0.1:{free_port()}", persona.key, str(project.pk), "cc-down")
    agent.env["CTX_HOOK_BUDGET"] = "1"  # it retries a refused connection until the budget is spent
    agent.write(data[: len(data) // 2])
    done = agent.run_process("PostToolUse")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert agent.state() == {} and not AgentSession.objects.filter(external_id="cc-down").exists()
    assert "can't be reached" in (Path(agent.env["CTX_STATE_DIR"]) / "hook.log").read_text()
    agent.write(data[len(data) // 2 :])
    agent.env["CTX_URL"] = live_server.url
    del agent.env["CTX_HOOK_BUDGET"]  # the default budget: one second is the whole run's, requests included
    assert agent.run("Stop") == ""
    synced = AgentSession.objects.get(external_id="cc-down")
    importing_reference = _import_text(persona, reference, data, name=synced.name)
    assert snapshot(synced) == snapshot(importing_reference)


def _import_text(persona, project, data: bytes, *, name: str) -> AgentSession:
    from compaction.transcripts import read_transcript

    return importing.session_import(
        user=persona.user, project=project, transcript=read_transcript(data, "claude-code"), name=name
    ).session


def test_a_partial_last_line_waits_for_the_next_run(owner, live_server, tmp_path):
    persona, project, _ = owner
    data = agent_session(2).text().encode()
    lines = data.splitlines(keepends=True)
    agent = Agent(tmp_path, live_server.url, persona.key, project.name, "cc-partial")
    complete = b"".join(lines[:4])
    agent.write(complete + lines[4][:30])
    agent.run()
    assert agent.state()["file_pos"] == agent.state()["offset"] == len(complete)
    synced = AgentSession.objects.get(external_id="cc-partial")
    assert synced.metadata["transcript"]["offset"] == len(complete)
    agent.write(lines[4][30:] + b"".join(lines[5:]))
    agent.run("SessionEnd")
    assert agent.state()["file_pos"] == len(data)
    synced.refresh_from_db()
    assert synced.message_count == 8


def test_bad_input_or_no_configuration_exits_0_silently(tmp_path):
    for stdin, env in [
        ("not json", {"CTX_URL": "http://127.0.0.1:9", "CTX_API_KEY": "k", "CTX_PROJECT": "p"}),
        (json.dumps({"session_id": "x", "transcript_path": str(tmp_path / "missing.jsonl")}), {}),
        ("[1, 2]", {"CTX_URL": "http://127.0.0.1:9", "CTX_API_KEY": "k", "CTX_PROJECT": "p"}),
    ]:
        env["CTX_STATE_DIR"] = str(tmp_path / "state")
        done = subprocess.run(
            [PYTHON, str(HOOK)], input=stdin, env={"PATH": os.environ["PATH"], **env}, capture_output=True, text=True
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def said(printed: str) -> str:
    """What the agent reads: plain text, or PostToolUse's additionalContext."""
    if printed.startswith("{"):
        payload = json.loads(printed)["hookSpecificOutput"]
        assert payload["hookEventName"] == "PostToolUse"
        return payload["additionalContext"]
    return printed.strip()


def test_warns_at_remind_and_asks_for_a_checkpoint_above_90_percent(owner, live_server, tmp_path):
    persona, project, _ = owner
    # A small window (and no automatic compaction, so the hook is the one to ask): a few turns fill it.
    agent_sessions.session_create(
        user=persona.user, project=project, name="small", external_id="cc-full", context_window=4096, auto_compact=False
    )
    agent = Agent(tmp_path, live_server.url, persona.key, project.name, "cc-full")
    agent.env["CTX_CHECKPOINT"] = "1"
    data = agent_session(30, output="a line of output\n" * 4).text().encode()
    heard: list[tuple[float, str]] = []  # (usage after the run, what the agent read)
    for n, line in enumerate(data.splitlines(keepends=True)):
        agent.write(line)
        text = said(agent.run("PostToolUse" if n % 2 else "UserPromptSubmit"))
        heard.append((usage.session_status(AgentSession.objects.get(external_id="cc-full"))["usage_percent"], text))
        if text.startswith("⚠️"):
            break
    quiet = [percent for percent, text in heard if not text]
    reminded = [text for _, text in heard if text.startswith("ctxweb: this session's context is")]
    assert quiet and max(quiet) < 60  # the default policy reminds at 60 %
    assert reminded and all(60 <= float(t.split(" is ", 1)[1].split("%")[0]) <= 90 for t in reminded)
    assert all("Context at" in t for t in reminded)  # and the policy's recommendation
    last = heard[-1][1]
    # Above 90 % (the hook warns only there); its text rounds to 0.1, so 90.04 % reads "90.0%".
    assert float(last.split(" is ", 1)[1].split("%")[0]) >= 90 and "checkpoint" in last
    record = Compaction.objects.get(session__external_id="cc-full")
    assert record.level == "summarize" and f"compaction {record.pk}" in last
    assert AgentSession.objects.get(external_id="cc-full").checkpoints.exists()


def test_two_runs_at_once_store_nothing_twice(owner, live_server, tmp_path):
    persona, project, reference = owner
    data = agent_session(4).text().encode()
    agent = Agent(tmp_path, live_server.url, persona.key, project.name, "cc-parallel")
    agent.write(data)
    procs = [
        subprocess.Popen(
            [PYTHON, str(HOOK)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **agent.env},
            text=True,
        )
        for _ in range(3)
    ]
    for p in procs:
        p.stdin.write(agent.event("PostToolUse"))
        p.stdin.close()
    deadline = time.monotonic() + 60
    for p in procs:
        assert p.wait(timeout=max(1, deadline - time.monotonic())) == 0
    agent.run("Stop")
    synced = AgentSession.objects.get(external_id="cc-parallel")
    assert snapshot(synced) == snapshot(_import_text(persona, reference, data, name=synced.name))


def test_a_handed_off_session_is_said_once(owner, live_server, tmp_path):
    persona, project, _ = owner
    data = agent_session(2).text().encode()
    lines = data.splitlines(keepends=True)
    agent = Agent(tmp_path, live_server.url, persona.key, project.name, "cc-closed")
    agent.write(b"".join(lines[:5]))
    agent.run("Stop")
    AgentSession.objects.filter(external_id="cc-closed").update(status="handed_off")
    agent.write(b"".join(lines[5:]))
    first = agent.run("UserPromptSubmit")
    assert first.startswith("ctxweb: session") and "handed off" in first
    assert agent.run("UserPromptSubmit") == ""


def test_the_hook_follows_a_session_continued_in_a_fresh_one(owner, live_server, tmp_path):
    persona, project, _ = owner
    data = agent_session(4).text().encode()
    lines = data.splitlines(keepends=True)
    agent = Agent(tmp_path, live_server.url, persona.key, project.name, "cc-continued")
    agent.write(b"".join(lines[:8]))
    agent.run("Stop")
    first = AgentSession.objects.get(external_id="cc-continued")
    stored = Message.objects.filter(session=first).count()
    # What the policy's auto-continue does at the handoff level (here by hand, to pick the moment).
    document = handoffs.handoff_create(session=first, user=persona.user, continue_=True)
    fresh = document.continuation
    agent.write(b"".join(lines[8:]))
    told = said(agent.run("UserPromptSubmit"))
    assert f"handed session {first.pk} off into session {fresh.pk}" in told
    assert Message.objects.filter(session=first).count() == stored  # nothing more in the closed one
    assert Message.objects.filter(session=fresh).count() > 1  # the handoff, then what followed it
    assert agent.state()["continued_in"] == fresh.pk
    assert "handed session" not in said(agent.run("Stop"))  # said once


def test_a_line_too_long_to_upload_is_left_out_recorded_and_the_rest_goes_on(owner, live_server, tmp_path, monkeypatch):
    """A line over the hook's limit (a huge tool output or image) is sent as a note of its size: the server
    records it as a skipped line, and everything after it is stored — even after the hook lost its state."""
    persona, project, _ = owner
    monkeypatch.setattr(hook, "MAX_LINE", 3000)
    t = agent_session(1)
    t.prompt("before the big one")
    t.result("toolu_1", "x" * 5000)  # one line of ~5 kB
    t.prompt("after the big one")
    data = t.text().encode()
    agent = Agent(tmp_path, live_server.url, persona.key, project.name, "cc-big")
    agent.write(data)
    agent.run("Stop")
    session = AgentSession.objects.get(external_id="cc-big")
    texts = [m.content for m in Message.objects.filter(session=session).order_by("seq")]
    assert texts[-2:] == ["before the big one", "after the big one"]
    session.refresh_from_db()
    assert session.rejected_count == 1 and "too long to upload" in session.rejected_reason
    # the hook loses its state: it finds its place again although the server's offsets differ from the file's
    for f in Path(agent.env["CTX_STATE_DIR"]).glob("*.json"):
        f.unlink()
    t.prompt("later")
    agent.write(t.text().encode()[len(data) :])
    agent.run("Stop")
    assert Message.objects.filter(session=session).order_by("-seq").first().content == "later"
    assert AgentSession.objects.get(pk=session.pk).rejected_count == 1


def test_a_stop_run_before_its_last_reply_reaches_the_file_waits_for_it(owner, live_server, tmp_path):
    """Claude Code may run Stop before its last lines are in the file. The tool result is held for the
    request it went into, whose own copy (with a reminder Claude Code injected) comes in a later line;
    a final upload without it would let the result go as it is, where the import reads the request's
    copy. The hook waits for the reply Stop names, so the session is the import's."""
    persona, project, reference = owner
    w = BlobWriter("cc-late")
    w.user_line("Run the tests.")
    w.block("msg_late1", tool_block("toolu_late1", "make test"))
    result = {"type": "tool_result", "tool_use_id": "toolu_late1", "content": "42 passed"}
    w.user_line([result])
    w.send([result, reminder("<total_tokens>14968535 tokens left</total_tokens>")], "blob")
    w.block("msg_late2", text_block("All 42 tests pass."))
    data = w.text().encode()
    lines = data.splitlines(keepends=True)
    agent = Agent(tmp_path, live_server.url, persona.key, project.name, "cc-late")
    agent.write(b"".join(lines[:3]))  # the prompt, the call, its result: the rest is still being written
    agent.run()
    late = threading.Timer(0.3, agent.write, [b"".join(lines[3:])])
    late.start()
    stop = {**json.loads(agent.event("Stop")), "last_assistant_message": "All 42 tests pass."}
    assert hook.main(json.dumps(stop), agent.env, io.StringIO()) == 0
    late.join()
    assert agent.state()["file_pos"] == len(data)  # Stop's own upload took the reply in
    agent.run("SessionEnd")
    synced = AgentSession.objects.get(project=project, external_id="cc-late")
    imported = _import_text(persona, reference, data, name="cc-late")
    assert snapshot(synced)["messages"] == snapshot(imported)["messages"]
    assert "tokens left" in json.dumps([row[2] for row in snapshot(synced)["messages"]])
