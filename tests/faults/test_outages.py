"""Real outages of real services, against gunicorn and Celery workers in their own processes.

Each scenario runs its own Redis or its own Postgres cluster (never the machine's), stops it while
clients write, and checks what clients were answered and what was stored. Slow (about 20–40 s each);
marked ``services``: CI runs them, a laptop without Postgres/Redis skips them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from bench._server import ROOT, Client, free_port, gunicorn_on_postgres, make_key
from tests.conftest import need

pytestmark = [pytest.mark.services, pytest.mark.slow]

PG_BIN = next(iter(sorted(Path("/usr/lib/postgresql").glob("*/bin"))), Path("/nonexistent"))
QUIET = {"CTX_RATE_LIMIT_KEY": "", "CTX_RATE_LIMIT_USER": "", "LOG_LEVEL": "WARNING"}


def wait_until(check, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"{what}: not within {seconds} s")


# ----------------------------------------------------------------------------- Redis


class PrivateRedis:
    def __init__(self) -> None:
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
        )
        wait_until(lambda: _redis_ping(self.port), 10, "private redis up")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


def _redis_ping(port: int) -> bool:
    return (
        subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True).stdout.strip() == "PONG"
    )


@pytest.fixture
def private_redis() -> Iterator[PrivateRedis]:
    need(shutil.which("redis-server") is not None, "redis-server is not installed")
    redis = PrivateRedis()
    redis.start()
    yield redis
    redis.stop()


def start_worker(env: dict[str, str], name: str) -> subprocess.Popen:
    log = open(ROOT / "test-artifacts" / f"fault-{name}.log", "w")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "ctxweb", "worker", "--pool=solo", "-n", f"{name}@%h",
         "--without-gossip", "--without-mingle", "--loglevel=INFO"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip


def messages(start: int, n: int, size: int = 400) -> list[dict]:
    filler = " ".join(f"word{i % 97}" for i in range(size))
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}: {filler}", "client_id": f"m{i}"}
        for i in range(start, start + n)
    ]


def compaction_states(client: Client, sid: int) -> list[str]:
    return [c["status"] for c in client.call("GET", f"/api/v1/sessions/{sid}/compactions/")[1]["results"]]


def all_client_ids(client: Client, sid: int) -> list[str]:
    ids: list[str] = []
    after = 0
    while True:
        page = client.call("GET", f"/api/v1/sessions/{sid}/messages/?state=all&after_seq={after}")[1]["results"]
        if not page:
            return ids
        ids += [m["client_id"] for m in page]
        after = page[-1]["seq"]


def test_redis_down_appends_are_stored_and_answered_and_work_catches_up(private_redis):
    (ROOT / "test-artifacts").mkdir(exist_ok=True)
    env_extra = {
        **QUIET,
        "REDIS_URL": private_redis.url,
        "CTX_QUEUE_PREFIX": "fault-redis-",  # a worker without -Q serves the three queues of its prefix
        "CELERY_TASK_ALWAYS_EAGER": "0",
        "CTX_PENDING_WARNING_SECONDS": "1",
        "CTX_REQUEUE_AFTER_SECONDS": "1",
    }
    with gunicorn_on_postgres("ctxweb_fault_redis", workers=2, extra_env=env_extra) as (hostport, env):
        worker = start_worker(env, "fault-redis")
        try:
            client = Client(hostport, make_key(env))
            _, project = client.call("POST", "/api/v1/projects/", {"name": "faults"})
            status, session = client.call(
                "POST", "/api/v1/sessions/", {"project": project["id"], "name": "s", "context_window": 20_000}
            )
            assert status == 201
            sid = session["id"]
            # Past the compact threshold with Redis up: the worker compacts.
            assert client.call("POST", f"/api/v1/sessions/{sid}/messages/", messages(0, 40))[0] == 201
            wait_until(lambda: "succeeded" in compaction_states(client, sid), 60, "first compaction")

            private_redis.stop()
            answered = []
            for k in range(4):  # appends while the broker and the cache are gone
                t0 = time.monotonic()
                status, _ = client.call("POST", f"/api/v1/sessions/{sid}/messages/", messages(40 + 20 * k, 20))
                answered.append((status, time.monotonic() - t0))
            assert [s for s, _ in answered] == [201] * 4, answered
            assert max(seconds for _, seconds in answered) < 10
            assert len(all_client_ids(client, sid)) == 120
            time.sleep(1.5)
            status, report = client.call("GET", f"/api/v1/sessions/{sid}/status/")
            assert status == 200
            assert any("workers may be down" in w for w in report["warnings"]), report["warnings"]

            private_redis.start()  # back, empty: what was queued meanwhile never reached it
            requeue = subprocess.run(
                [sys.executable, "manage.py", "shell", "-c",
                 "from sessions_app.tasks import requeue_stale_compactions; print(requeue_stale_compactions())"],
                cwd=ROOT, env=env, capture_output=True, text=True, check=True,
            )  # fmt: skip
            assert int(requeue.stdout.strip().splitlines()[-1]) >= 1
            try:
                wait_until(
                    lambda: not {"queued", "running"} & set(compaction_states(client, sid)),
                    90,
                    "queued compactions run after Redis is back",
                )
            except AssertionError as exc:  # what the rows and the worker say, for a failure seen once in CI
                rows = client.call("GET", f"/api/v1/sessions/{sid}/compactions/")[1]["results"]
                worker_log = (ROOT / "test-artifacts" / "fault-fault-redis.log").read_text()
                keys = ("id", "status", "level", "attempts", "error", "created_at", "started_at")
                seen = [{k: c.get(k) for k in keys} for c in rows]
                raise AssertionError(f"{exc}\nrequeued: {requeue.stdout!r}\ncompactions: {seen}\n"
                                     f"worker log, last lines:\n{worker_log[-6000:]}") from None  # fmt: skip
            ids = all_client_ids(client, sid)
            assert sorted(ids) == sorted(f"m{i}" for i in range(120))  # each once, none lost
        finally:
            worker.terminate()
            worker.wait(timeout=30)


# ----------------------------------------------------------------------------- Postgres


@pytest.fixture
def private_postgres() -> Iterator[str]:
    need((PG_BIN / "initdb").exists(), f"PostgreSQL binaries not found under {PG_BIN}")
    need(os.geteuid() == 0, "needs root (to run a private cluster as the postgres user)")
    home = Path(tempfile.mkdtemp(prefix="ctx-fault-pg-"))
    home.chmod(0o777)  # the cluster runs as postgres, which can't enter root's pytest folders
    data = home / "data"
    port = free_port()

    def as_postgres(*cmd: str) -> None:
        subprocess.run(["su", "postgres", "-c", " ".join(cmd)], check=True, stdout=subprocess.DEVNULL, timeout=120)

    as_postgres(str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres")
    ctl = [str(PG_BIN / "pg_ctl"), "-D", str(data), "-o", f"'-p {port} -k /tmp -c listen_addresses=127.0.0.1'", "-w"]
    ctl += ["-l", str(home / "log")]  # with a log file, pg_ctl leaves no pipe open behind it
    as_postgres(*ctl, "start")
    url = f"postgres://postgres@127.0.0.1:{port}"
    os.environ["_CTX_FAULT_PG_RESTART"] = " ".join([*ctl, "-m", "fast", "restart"])
    yield url
    subprocess.run(["su", "postgres", "-c", " ".join([*ctl, "-m", "immediate", "stop"])], capture_output=True)
    shutil.rmtree(home, ignore_errors=True)


def test_postgres_restarted_under_load_answers_503_never_500_never_a_partial_batch(private_postgres):
    (ROOT / "test-artifacts").mkdir(exist_ok=True)
    with gunicorn_on_postgres("ctxweb_fault_pg", workers=2, extra_env=QUIET, pg=private_postgres) as (hostport, env):
        client = Client(hostport, make_key(env))
        _, project = client.call("POST", "/api/v1/projects/", {"name": "faults"})
        body = {"project": project["id"], "name": "s", "auto_compact": False}
        sessions = [client.call("POST", "/api/v1/sessions/", body)[1]["id"] for _ in range(4)]
        outcomes: list[tuple[int, int, list[str], str | None]] = []  # (session, status, client ids, retry-after)
        stop = threading.Event()

        key = client.headers["Authorization"].split()[1]

        def agent(sid: int) -> None:
            c = Client(hostport, key)
            n = 0
            while not stop.is_set():
                ids = [f"s{sid}-b{n}-{i}" for i in range(5)]
                batch = [
                    {"role": "user", "content": f"batch {n} item {i}", "client_id": cid} for i, cid in enumerate(ids)
                ]
                try:
                    c.conn.request("POST", f"/api/v1/sessions/{sid}/messages/", json.dumps(batch), c.headers)
                    response = c.conn.getresponse()
                    response.read()
                    outcomes.append((sid, response.status, ids, response.getheader("Retry-After")))
                except OSError:
                    c = Client(hostport, key)  # a dropped keep-alive connection
                    outcomes.append((sid, 0, ids, None))
                n += 1
                time.sleep(0.02)

        threads = [threading.Thread(target=agent, args=(sid,), daemon=True) for sid in sessions]
        for t in threads:
            t.start()
        try:
            time.sleep(2)
            restart = os.environ["_CTX_FAULT_PG_RESTART"]
            subprocess.run(["su", "postgres", "-c", restart], check=True, stdout=subprocess.DEVNULL, timeout=120)
            time.sleep(3)
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=90)

        statuses = {status for _, status, _, _ in outcomes}
        assert 500 not in statuses and statuses <= {201, 503, 0}, statuses
        assert any(status == 503 for _, status, _, _ in outcomes), "the restart was not noticed by any request"
        assert all(retry == "5" for _, status, _, retry in outcomes if status == 503)
        with psycopg.connect(f"{private_postgres}/ctxweb_fault_pg") as conn:
            stored = {row[0] for row in conn.execute("SELECT client_id FROM sessions_app_message")}
            gaps = conn.execute(
                "SELECT session_id FROM sessions_app_message GROUP BY session_id HAVING count(*) <> max(seq)"
            ).fetchall()
        for _, status, ids, _ in outcomes:
            present = sum(i in stored for i in ids)
            assert present in (0, len(ids)), f"a partial batch: {ids}"  # whole or not at all
            if status == 201:
                assert present == len(ids)
        assert not gaps
