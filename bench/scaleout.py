"""More than one node: two web nodes and three workers (one per queue) on one Postgres and Redis.

    .venv/bin/python bench/scaleout.py [--agents 50] [--messages 60] [--window 6000]

Starts two gunicorn instances on two ports, a Celery worker for each queue (counting, compaction,
maintenance; ``CTX_QUEUE_PREFIX`` keeps the run's queues apart) and the fake Anthropic server of
``tests/fakes`` (exact counts and summaries, never the real API). Agents alternate between the two
nodes, each appending its messages one at a time (small windows, so compactions run), retrying a
failed call with the same client id. A third of the way in the compaction worker is killed with
SIGKILL (and a new one started); half way, the second web node is stopped and started again. This
script plays beat: every few seconds it sends ``requeue_stale_compactions`` to the maintenance
worker, as beat does every minute in production (the hard time limit is short here, so a killed worker's run is
stale within a minute). Then it waits for the queues to drain and checks, from the database: every
acknowledged message stored once, seqs gapless, totals right, never two compactions of a session at
once, nothing queued or running, the Redis queues empty, no 5xx. Prints throughput per web node and
tasks per worker; exits 1 on any FAIL. ``tests/scale/test_scaleout.py`` runs it small in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._server import PG, ROOT, Client, _psql, free_port, make_key
from bench.load import Recorder, checks, conversations, script_for, sql, wait_for_compactions
from tests.fakes.anthropic_server import FakeAnthropic

KINDS = ("counting", "compaction", "maintenance")
CHECKPOINT = {
    "objective": "Keep the service running",
    "completed": ["step one"],
    "in_progress": ["step two"],
    "pending": [],
    "blockers": [],
    "decisions": [],
    "files_modified": [],
    "important_details": [],
    "last_user_request": "Go on.",
}


class Node:
    """One gunicorn instance (a web node) that can be stopped and started on the same port."""

    def __init__(self, name: str, env: dict[str, str], log_dir: Path, workers: int) -> None:
        self.name, self.env, self.workers = name, env, workers
        self.port = free_port()
        self.log = log_dir / f"scaleout-{name}.log"
        self.proc: subprocess.Popen | None = None
        self.served: Counter[int] = Counter()  # HTTP status → count, as the agents saw it
        self.lock = threading.Lock()

    @property
    def hostport(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "ctxweb.wsgi:application", "--bind", self.hostport,
             "--workers", str(self.workers), "--log-level", "warning"],
            cwd=ROOT, env=self.env, stdout=self.log.open("a"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        wait_until(lambda: _answers(self.hostport), 30, f"web node {self.name} to answer")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # gunicorn finishes the requests in flight, then exits
            self.proc.wait(timeout=30)

    def record(self, status: int) -> None:
        with self.lock:
            self.served[status] += 1


def _answers(hostport: str) -> bool:
    with suppress(OSError):
        status, _ = Client(hostport, "").call("GET", "/healthz/")
        return status == 200
    return False


def wait_until(condition: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise SystemExit(f"gave up waiting for {what}")


def start_worker(kind: str, env: dict[str, str], log_dir: Path, generation: int = 0) -> subprocess.Popen:
    queue = env["CTX_QUEUE_PREFIX"] + kind
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "ctxweb", "worker", "--pool=solo", "-Q", queue,
         "-n", f"{queue}-{generation}@%h", "--without-gossip", "--without-mingle", "--loglevel=INFO"],
        cwd=ROOT, env=env, stdout=(log_dir / f"scaleout-worker-{kind}-{generation}.log").open("w"),
        stderr=subprocess.STDOUT,
    )  # fmt: skip


def run_agent(node: Node, key: str, project: int, agent: int, script: list[dict], window: int, rec: Recorder) -> None:
    client = Client(node.hostport, key)

    def call(method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """One call, retried (same body, so the same client id) while the node is away."""
        nonlocal client
        for _ in range(100):
            t0 = time.perf_counter()
            try:
                status, answer = client.call(method, path, body)
            except (OSError, ConnectionError, json.JSONDecodeError):
                client = Client(node.hostport, key)
                time.sleep(0.2)
                continue
            node.record(status)
            rec.record(f"{method} /{path.rstrip('/').split('/')[-1]}/", time.perf_counter() - t0, status)
            if status == 503 or status == 429:
                time.sleep(0.2)
                continue
            return status, answer
        rec.errors.append(f"agent {agent}: {method} {path} never answered")
        return 0, None

    status, session = call("POST", "/api/v1/sessions/",
                           {"project": project, "name": f"agent {agent}", "context_window": window})  # fmt: skip
    if status != 201:
        rec.errors.append(f"agent {agent}: session create answered {status}: {session}")
        return
    for i, message in enumerate(script):
        body = {**message, "client_id": f"agent{agent}-{i}"}
        status, answer = call("POST", f"/api/v1/sessions/{session['id']}/messages/", body)
        if status == 201:
            with rec.lock:
                rec.acknowledged.add(body["client_id"])
        elif status:
            rec.errors.append(f"agent {agent} message {i}: {status} {str(answer)[:200]}")


def play_beat(env: dict[str, str], stop: threading.Event) -> None:
    """Beat's "re-send stale compactions" job, sent to the maintenance queue every 5 s (every minute in
    production)."""
    code = "from sessions_app import tasks; tasks.send(tasks.requeue_stale_compactions)"
    while not stop.wait(5):
        subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=env, capture_output=True)


def tasks_run(log: Path) -> int:
    return sum(1 for line in log.read_text(errors="replace").splitlines() if " succeeded in " in line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--messages", type=int, default=60)
    parser.add_argument("--window", type=int, default=6_000)
    parser.add_argument("--web-workers", type=int, default=2, help="gunicorn workers per web node")
    parser.add_argument("--db", default="ctxweb_bench_scaleout")
    args = parser.parse_args(argv)
    log_dir = ROOT / "test-artifacts"
    log_dir.mkdir(exist_ok=True)
    pool = conversations()
    scripts = [script_for(a, pool, args.messages) for a in range(args.agents)]
    prefix = f"scaleout-{os.getpid()}-"
    redis = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
    db_url = f"{PG}/{args.db}"
    _psql(f"DROP DATABASE IF EXISTS {args.db} WITH (FORCE)")
    _psql(f"CREATE DATABASE {args.db}")
    with ExitStack() as stack, FakeAnthropic(default_reply=json.dumps(CHECKPOINT)) as fake:
        stack.callback(lambda: _psql(f"DROP DATABASE IF EXISTS {args.db} WITH (FORCE)"))
        env = {
            **os.environ, "DATABASE_URL": db_url, "REDIS_URL": redis, "CELERY_TASK_ALWAYS_EAGER": "0",
            "CTX_QUEUE_PREFIX": prefix, "DEBUG": "0", "LOG_LEVEL": "WARNING",
            "SECRET_KEY": "bench-only-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz",
            "CTX_RATE_LIMIT_KEY": "", "CTX_RATE_LIMIT_USER": "",
            "ANTHROPIC_API_KEY": "bench-key", "ANTHROPIC_BASE_URL": fake.base_url, "ANTHROPIC_MAX_RETRIES": "0",
            "CTX_EXACT_COUNT_DEBOUNCE_SECONDS": "1", "CTX_REQUEUE_AFTER_SECONDS": "5",
            "CTX_TASK_SOFT_TIME_LIMIT": "15", "CTX_TASK_TIME_LIMIT": "20",
        }  # fmt: skip
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
        nodes = [Node(name, env, log_dir, args.web_workers) for name in ("a", "b")]
        for node in nodes:
            node.start()
            stack.callback(node.stop)
        workers = {kind: start_worker(kind, env, log_dir) for kind in KINDS}
        logs = {kind: [log_dir / f"scaleout-worker-{kind}-0.log"] for kind in KINDS}

        def stop_workers() -> None:
            for proc in workers.values():
                proc.terminate()
                with suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=20)

        stack.callback(stop_workers)
        stop_beat = threading.Event()
        beat = threading.Thread(target=play_beat, args=(env, stop_beat), daemon=True)
        beat.start()
        stack.callback(stop_beat.set)
        key = make_key(env)
        status, project = Client(nodes[0].hostport, key).call("POST", "/api/v1/projects/", {"name": "scaleout"})
        assert status == 201, project
        rec = Recorder()
        threads = [
            threading.Thread(target=run_agent, args=(nodes[a % 2], key, project["id"], a, scripts[a], args.window, rec))
            for a in range(args.agents)
        ]
        total = args.agents * args.messages
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        events = []
        wait_until(lambda: len(rec.acknowledged) >= total // 3, 600, "a third of the messages")
        workers["compaction"].send_signal(signal.SIGKILL)
        workers["compaction"].wait()
        events.append(f"compaction worker killed (SIGKILL) after {len(rec.acknowledged):,} messages")
        workers["compaction"] = start_worker("compaction", env, log_dir, generation=1)
        logs["compaction"].append(log_dir / "scaleout-worker-compaction-1.log")
        wait_until(lambda: len(rec.acknowledged) >= total // 2, 600, "half of the messages")
        nodes[1].stop()
        events.append(f"web node b stopped after {len(rec.acknowledged):,} messages, then started again")
        nodes[1].start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - t0
        pending = wait_for_compactions(db_url, seconds=180)
        results = checks(db_url, rec)
        results.append(("the compaction queue drained", pending == 0, f"{pending} still queued or running"))
        import redis as redis_client

        client = redis_client.Redis.from_url(redis)
        # The queues drain, however slowly a busy machine runs the workers: a message left for good fails.
        deadline = time.monotonic() + 180
        lengths = {kind: client.llen(prefix + kind) for kind in KINDS}
        while any(lengths.values()) and time.monotonic() < deadline:
            time.sleep(0.5)
            lengths = {kind: client.llen(prefix + kind) for kind in KINDS}
        results.append(("the Redis queues are empty", not any(lengths.values()), str(lengths)))
        counts = {kind: sum(tasks_run(p) for p in logs[kind] if p.exists()) for kind in KINDS}
        compactions = dict(sql(db_url, "SELECT status, count(*) FROM sessions_app_compaction GROUP BY 1"))
    print(f"{args.agents} agents × {args.messages} messages over 2 web nodes: {elapsed:.1f} s, "
          f"{len(rec.acknowledged) / elapsed:.0f} messages/s")  # fmt: skip
    for event in events:
        print(f"  {event}")
    for node in nodes:
        served = sum(node.served.values())
        print(f"web node {node.name}: {served:,} responses ({served / elapsed:.0f}/s) {dict(node.served)}")
    for kind in KINDS:
        print(f"worker {kind}: {counts[kind]:,} tasks ({counts[kind] / elapsed:.1f}/s)")
    print(f"compactions: {compactions}")
    for name, ok, detail in results:
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")
    return 0 if all(ok for _, ok, _ in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
