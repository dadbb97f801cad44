"""Start ctxweb under gunicorn on Postgres for a benchmark, and talk to it over keep-alive HTTP."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _psql(sql: str, pg: str = PG) -> None:
    subprocess.run(["psql", f"{pg}/postgres", "-q", "-c", sql], check=True, capture_output=True)


@contextmanager
def gunicorn_on_postgres(
    db: str,
    *,
    workers: int = 4,
    extra_env: dict[str, str] | None = None,
    pg: str = PG,
    extra_args: list[str] | None = None,
):
    """A fresh database, migrated; gunicorn serving it; yields (base_url, env)."""
    _psql(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)", pg)
    _psql(f"CREATE DATABASE {db}", pg)
    env = {
        **os.environ,
        # BENCH_APP_PG: where the app connects, when that is not the server itself (a pgbouncer in front).
        "DATABASE_URL": f"{os.environ.get('BENCH_APP_PG', pg)}/{db}",
        "DEBUG": "0",
        "LOG_LEVEL": "WARNING",
        "SECRET_KEY": "bench-only-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz",
        # Benchmarks measure the pipeline, not the rate limiter (tests cover that).
        "CTX_RATE_LIMIT_KEY": "",
        "CTX_RATE_LIMIT_USER": "",
        **(extra_env or {}),
    }
    env.pop("REDIS_URL", None) if "REDIS_URL" not in (extra_env or {}) else None
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "ctxweb.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "--log-level",
            "warning",
            *(extra_args or []),
        ],
        cwd=ROOT,
        env=env,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                time.sleep(0.2)
        yield f"127.0.0.1:{port}", env
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        if not os.environ.get("BENCH_KEEP_DB"):  # set: left for a look afterwards (EXPLAIN, a profiler)
            with suppress(subprocess.CalledProcessError):  # the server is gone already (a fault scenario stopped it)
                _psql(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)", pg)


def make_key(env: dict[str, str], username: str = "bench") -> str:
    out = subprocess.run(
        [sys.executable, "manage.py", "ctx", "apikey", username, "--create-user", "--json"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout)["key"]


class Client:
    def __init__(self, hostport: str, key: str) -> None:
        host, port = hostport.split(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=60)
        self.headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        self.conn.request(method, path, body=data, headers=self.headers)
        resp = self.conn.getresponse()
        raw = resp.read()
        return resp.status, (json.loads(raw) if raw else None)
