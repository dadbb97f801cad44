"""The Claude Code hook against a scripted stand-in for ctxweb: 429 waits for its ``Retry-After``, 5xx and
lost connections are retried with backoff, other 4xx are not, and no run takes longer than
``CTX_HOOK_BUDGET`` (a wait that would outlast it gives up at once). Whatever happens it exits 0,
prints nothing and logs why to ``hook.log``. Run as Claude Code runs it: a separate ``python3``."""

from __future__ import annotations

import email.utils
import hashlib
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ctxclient import ApiError, Client, DeadlineExceeded, Retry, Unreachable
from ctxclient.retry import retry_after_seconds
from tests.claude_code_lines import agent_session

ROOT = Path(__file__).resolve().parents[2]
HOOK = ROOT / "integrations" / "claude_code" / "hook.py"
PYTHON = os.environ.get("CTX_HOOK_PYTHON") or shutil.which("python3") or sys.executable
MARGIN = 3.0  # seconds for the interpreter to start and the stub to answer, on a busy two-core machine
SESSION = "cc-retries"


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: dict | str | None = None  # None on an error: ctxweb's {"detail", "code"}
    drop: bool = False  # close the connection without answering
    stall: float = 0.0  # seconds before answering


class Stub:
    """Answers ``POST /api/v1/sessions/transcript/`` from a script (the last reply repeats), keeps every
    request body, and the uploads it accepted as ctxweb would (its answer's offset follows the bytes)."""

    def __init__(self, *script: Reply) -> None:
        self.script = list(script)
        self.requests: list[dict] = []
        self.uploads: list[dict] = []
        self.released = threading.Event()  # ends a stalled answer when the test is over
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append(body)
                reply = stub.script[min(len(stub.requests), len(stub.script)) - 1]
                if reply.stall:
                    stub.released.wait(reply.stall)
                if reply.drop:
                    self.close_connection = True
                    return
                if reply.status < 300:
                    stub.uploads.append(body)
                    payload: dict | str = {
                        "session": 7,
                        "offset": body["offset"] + len(body["lines"].encode()),
                        "status": {"usage_percent": 1.0, "level": "ok"},
                    }
                else:
                    payload = reply.body if reply.body is not None else {"detail": "scripted", "code": "scripted"}
                raw = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                self.send_response(reply.status)
                kind = "text/html" if isinstance(payload, str) else "application/json"
                for name, value in {"Content-Type": kind, **reply.headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: object) -> None:
                pass

        class Server(http.server.ThreadingHTTPServer):
            def handle_error(self, request: object, client_address: object) -> None:
                pass  # the hook hung up on a stalled answer: expected

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub_for() -> Iterator:
    stubs: list[Stub] = []

    def start(*script: Reply) -> Stub:
        stubs.append(Stub(*script))
        return stubs[-1]

    yield start
    for stub in stubs:
        stub.close()


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    state: dict
    log: str


class Agent:
    """A transcript and the hook's environment, pointed at a stub."""

    def __init__(self, tmp_path: Path, url: str, budget: float) -> None:
        self.transcript = tmp_path / "t.jsonl"
        self.data = agent_session(1).text().encode()
        self.transcript.write_bytes(self.data)
        self.state_dir = tmp_path / "state"
        self.env = {
            "PATH": os.environ["PATH"],
            "CTX_URL": url,
            "CTX_API_KEY": "ctx_test",
            "CTX_PROJECT": "p",
            "CTX_STATE_DIR": str(self.state_dir),
            "CTX_CHECKPOINT": "0",
            "CTX_HOOK_BUDGET": str(budget),
        }

    def run(self) -> Run:
        event = {"session_id": SESSION, "transcript_path": str(self.transcript), "hook_event_name": "PostToolUse"}
        started = time.monotonic()
        done = subprocess.run(
            [PYTHON, str(HOOK)], input=json.dumps(event), env=self.env, capture_output=True, text=True, timeout=60
        )
        seconds = time.monotonic() - started
        states = list(self.state_dir.glob("*.json"))
        log = self.state_dir / "hook.log"
        return Run(
            done.returncode,
            done.stdout,
            done.stderr,
            seconds,
            json.loads(states[0].read_text()) if states else {},
            log.read_text() if log.exists() else "",
        )


def landed(agent: Agent, stub: Stub, run: Run) -> None:
    assert (run.returncode, run.stdout, run.stderr) == (0, "", "")
    assert [(u["offset"], u["lines"]) for u in stub.uploads] == [(0, agent.data.decode())]  # exactly one
    assert run.state["file_pos"] == run.state["offset"] == len(agent.data)


def gave_up(stub: Stub, run: Run) -> None:
    assert (run.returncode, run.stdout, run.stderr) == (0, "", "")
    assert stub.uploads == [] and "file_pos" not in run.state  # the next run sends it all


def in_seconds(seconds: float) -> str:
    return email.utils.formatdate(time.time() + seconds, usegmt=True)


# ----------------------------------------------------------------------------- the hook


@pytest.mark.parametrize(
    "asked", [{"Retry-After": "1"}, {"retry-after-ms": "1000"}, {"Retry-After": "as a date"}], ids=str
)
def test_a_429_waits_for_its_retry_after_then_the_upload_lands(stub_for, tmp_path, asked):
    if asked.get("Retry-After") == "as a date":
        asked = {"Retry-After": in_seconds(2)}  # whole seconds: between 1 and 2 from now
    stub = stub_for(Reply(429, asked, {"detail": "Slow down.", "code": "throttled"}), Reply(200))
    agent = Agent(tmp_path, stub.url, budget=5)
    run = agent.run()
    landed(agent, stub, run)
    assert len(stub.requests) == 2
    assert 1.0 <= run.seconds < 2 + MARGIN
    assert "429 throttled: Slow down.; retry 1 in" in run.log


@pytest.mark.parametrize(
    "failure",
    [
        Reply(503, body="<h1>Service Unavailable</h1>"),  # a proxy in front of ctxweb
        Reply(503, body={"detail": "The database is restarting.", "code": "database_unavailable"}),
        Reply(drop=True),  # the connection is lost before an answer
    ],
    ids=["proxy 503", "ctxweb 503", "connection lost"],
)
def test_a_failure_twice_then_the_upload_lands(stub_for, tmp_path, failure):
    stub = stub_for(failure, failure, Reply(200))
    agent = Agent(tmp_path, stub.url, budget=5)
    run = agent.run()
    landed(agent, stub, run)
    assert len(stub.requests) == 3
    assert run.log.count("retry ") == 2 and "retry 2 in" in run.log
    assert run.seconds >= 0.25 + 0.5  # backed off: at least half of 0.5 s, then half of 1 s


def test_always_500_gives_up_within_the_budget(stub_for, tmp_path):
    stub = stub_for(Reply(500, body={"detail": "Boom.", "code": "error"}))
    agent = Agent(tmp_path, stub.url, budget=2)
    run = agent.run()
    gave_up(stub, run)
    assert run.seconds < 2 + MARGIN
    assert len(stub.requests) >= 3  # 0.5 s, then 1 s of backoff fit in 2 s
    assert "giving up on POST sessions/transcript/" in run.log and "ctxweb answered 500 error: Boom." in run.log


def test_a_server_that_stalls_is_cut_off_at_the_budget(stub_for, tmp_path):
    stub = stub_for(Reply(200, stall=30))
    agent = Agent(tmp_path, stub.url, budget=1.5)
    agent.env["CTX_TIMEOUT"] = "30"  # the budget, not the request timeout, is what ends it
    run = agent.run()
    gave_up(stub, run)
    assert run.seconds < 1.5 + MARGIN
    assert "can't be reached" in run.log


@pytest.mark.parametrize("asked", [{"Retry-After": "30"}, {"Retry-After": "as a date"}], ids=str)
def test_a_retry_after_beyond_the_budget_gives_up_at_once(stub_for, tmp_path, asked):
    if asked.get("Retry-After") == "as a date":
        asked = {"Retry-After": in_seconds(60)}
    stub = stub_for(Reply(429, asked, {"detail": "Slow down.", "code": "throttled"}), Reply(200))
    agent = Agent(tmp_path, stub.url, budget=3)
    run = agent.run()
    gave_up(stub, run)
    assert len(stub.requests) == 1
    assert run.seconds < MARGIN  # no sleep (it was asked to wait 30 s or more)
    assert "giving up on POST sessions/transcript/ after 1 attempt(s)" in run.log
    assert "the server asked for" in run.log and "ctxweb answered 429 throttled" in run.log


@pytest.mark.parametrize("status", [400, 403])
def test_other_client_errors_are_not_retried(stub_for, tmp_path, status):
    stub = stub_for(Reply(status, body={"detail": "No.", "code": "refused"}), Reply(200))
    agent = Agent(tmp_path, stub.url, budget=5)
    run = agent.run()
    gave_up(stub, run)
    assert len(stub.requests) == 1
    assert f"ctxweb answered {status} refused: No." in run.log and "retry" not in run.log


def test_waiting_for_another_runs_lock_fits_in_the_budget(stub_for, tmp_path):
    fcntl = pytest.importorskip("fcntl")
    stub = stub_for(Reply(200))
    agent = Agent(tmp_path, stub.url, budget=2)
    ident = hashlib.sha256(f"{stub.url}\np\n{SESSION}".encode()).hexdigest()[:32]
    agent.state_dir.mkdir()
    with open(agent.state_dir / f"{ident}.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # a run that never finishes
        run = agent.run()
    landed(agent, stub, run)
    assert 1.0 <= run.seconds < 2 + MARGIN  # half the budget waiting, then on without the lock


# ----------------------------------------------------------------------------- the client


def test_a_client_without_a_retry_policy_sends_once(stub_for):
    stub = stub_for(Reply(503, body="<h1>down</h1>"), Reply(200))
    with pytest.raises(Unreachable) as down:
        Client(stub.url, "ctx_test").upload_transcript("p", SESSION, "{}\n", offset=0)
    assert (down.value.status, len(stub.requests)) == (503, 1)


def test_a_spent_budget_sends_nothing(stub_for):
    stub = stub_for(Reply(200))
    client = Client(stub.url, "ctx_test", retry=Retry(deadline=time.monotonic()))
    with pytest.raises(DeadlineExceeded):
        client.upload_transcript("p", SESSION, "{}\n", offset=0)
    assert stub.requests == []


def test_a_409_relocation_is_left_to_the_caller(stub_for):
    stub = stub_for(Reply(409, body={"detail": "Gap.", "code": "transcript_offset", "expected_offset": 0}))
    client = Client(stub.url, "ctx_test", retry=Retry.within(5))
    with pytest.raises(ApiError) as gap:
        client.upload_transcript("p", SESSION, "{}\n", offset=10)
    assert (gap.value.status, gap.value.data["expected_offset"], len(stub.requests)) == (409, 0, 1)


def test_what_is_retried_and_how_long_it_waits():
    retry = Retry.within(10)
    assert [retry.retries(ApiError(s, "c", "d")) for s in (400, 401, 404, 409, 429, 500, 502, 503, 504)] == [
        *[False] * 4,
        *[True] * 5,
    ]
    assert retry.retries(Unreachable("refused")) and not retry.retries(DeadlineExceeded("spent"))
    assert retry.wait(ApiError(429, "throttled", "d", retry_after=3.5), 0) == 3.5
    for n in range(6):
        ceiling = min(retry.max_delay, retry.base_delay * 2**n)
        assert ceiling / 2 <= retry.wait(ApiError(500, "error", "d", retry_after=0.0), n) <= ceiling


def test_retry_after_in_every_form():
    now = time.time()
    assert retry_after_seconds({"Retry-After": "5"}) == 5.0
    assert retry_after_seconds({"retry-after-ms": "1500", "Retry-After": "5"}) == 1.5
    assert retry_after_seconds({"Retry-After": email.utils.formatdate(now + 90, usegmt=True)}, now) == pytest.approx(
        90, abs=1
    )
    assert retry_after_seconds({"Retry-After": email.utils.formatdate(now - 90, usegmt=True)}, now) == 0.0
    assert retry_after_seconds({"Retry-After": "soon"}) is None
    assert retry_after_seconds({}) is None
