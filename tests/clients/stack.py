"""ctxweb as a real client meets it: gunicorn with two workers (two recorder threads each) on a fresh
Postgres database, a real Celery worker on Redis, the scripted upstream behind the proxy; and what
it stored, read straight from the database."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from bench._server import ROOT, Client, gunicorn_on_postgres
from sessions_app.services.proxy.messages import identity
from tests.conftest import start_worker, stop_worker

WORKERS = 2
RECORDERS = 2


@dataclass(frozen=True)
class Stack:
    hostport: str
    env: dict[str, str]  # the app's (its DATABASE_URL names the fresh database)
    access_log: Path

    @property
    def database_url(self) -> str:
        return self.env["DATABASE_URL"]


@contextmanager
def ctxweb_stack(name: str, upstream_url: str, tmp: Path, extra_env: dict[str, str] | None = None) -> Iterator[Stack]:
    pg, own = os.environ["DATABASE_URL"].rsplit("/", 1)
    prefix = f"ctx-client-{name}-{os.getpid()}-"
    env = {
        "CTX_PROXY_UPSTREAM_URL": upstream_url,
        "CTX_PROXY_RECORDERS": str(RECORDERS),
        "REDIS_URL": os.environ["REDIS_URL"],
        "CTX_QUEUE_PREFIX": prefix,
        **(extra_env or {}),
    }
    log = tmp / "access.log"
    args = ["--worker-class", "gthread", "--threads", "4", "--access-logfile", str(log)]
    with gunicorn_on_postgres(f"{own}_client_{name}", workers=WORKERS, extra_env=env, pg=pg, extra_args=args) as (
        hostport,
        app_env,
    ):
        worker = start_worker(queue=prefix, env=app_env, log_path=tmp / "celery.log")
        try:
            yield Stack(hostport, app_env, log)
        finally:
            stop_worker(worker)


@dataclass(frozen=True)
class StoredSession:
    id: int
    name: str
    external_id: str
    parent_id: int | None
    status: str
    metadata: dict[str, Any]
    messages: tuple[tuple[str, Any, dict[str, Any]], ...]  # (role, content, metadata) in seq order
    rejections: int
    unrecorded: int  # requests forwarded while the database was down (the proxy's gaps)


def project_sessions(database_url: str, project: str) -> list[StoredSession]:
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT s.id, s.name, s.external_id, s.parent_id, s.status, s.metadata, s.unrecorded_requests"
            " FROM sessions_app_agentsession s"
            " JOIN sessions_app_project p ON p.id = s.project_id WHERE p.name = %s ORDER BY s.id",
            (project,),
        ).fetchall()
        out = []
        for sid, name, external_id, parent_id, status, metadata, unrecorded in rows:
            messages = conn.execute(
                "SELECT role, content, metadata FROM sessions_app_message WHERE session_id = %s ORDER BY seq", (sid,)
            ).fetchall()
            rejected = conn.execute(
                "SELECT count(*) FROM sessions_app_ingestrejection WHERE session_id = %s", (sid,)
            ).fetchone()
            out.append(
                StoredSession(
                    sid,
                    name,
                    external_id or "",
                    parent_id,
                    status,
                    metadata,
                    tuple(messages),
                    rejected[0] if rejected else 0,
                    unrecorded,
                )
            )
    return out


def settled(database_url: str, project: str, *, seconds: float = 30) -> list[StoredSession]:
    """What the project holds once the recorder threads are done (no change for two seconds)."""
    deadline = time.monotonic() + seconds
    last = project_sessions(database_url, project)
    quiet = 0
    while time.monotonic() < deadline and quiet < 2:
        time.sleep(1)
        now = project_sessions(database_url, project)
        quiet = quiet + 1 if now == last and any(s.messages for s in now) else 0
        last = now
    return last


_ACCESS = re.compile(r'"(?P<method>[A-Z]+) (?P<path>\S+) [^"]*" (?P<status>\d{3}) ')


def log_size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def access_log(path: Path, since: int = 0) -> list[tuple[str, str, int]]:
    """(method, path, status) of each request logged, from byte ``since`` on."""
    lines = path.read_bytes()[since:].decode().splitlines() if path.exists() else []
    return [(m["method"], m["path"], int(m["status"])) for m in map(_ACCESS.search, lines) if m]


def ctx_import(env: dict[str, str], transcript: Path, project: str, format: str = "claude-code") -> None:
    subprocess.run(
        [sys.executable, "manage.py", "ctx", "import", str(transcript), "--format", format,
         "--project", project, "--json"],
        cwd=ROOT, env=env, check=True, capture_output=True, text=True,
    )  # fmt: skip


def said(session: StoredSession) -> list[tuple[str, object]]:
    """A session's messages as what they say (``cache_control`` and the string/blocks form aside)."""
    return [(role, identity(content)) for role, content, _ in session.messages]


def first_difference(proxied: list, imported: list) -> str:
    for n, (a, b) in enumerate(zip(proxied, imported, strict=False)):
        if a != b:
            return f"message {n + 1}: proxy {str(a)[:300]!r} / import {str(b)[:300]!r}"
    return f"proxy {len(proxied)} messages, import {len(imported)}"


def compact(api: Client, session_id: int, level: str, *, seconds: float = 60) -> dict[str, Any]:
    """Ask for a compaction of ``level`` (the stack's Celery worker runs it) and wait for its end: the
    compaction as the API answers it, asserted succeeded."""
    code, compaction = api.call("POST", f"/api/v1/sessions/{session_id}/compactions/", {"level": level})
    assert code == 202, compaction
    deadline = time.monotonic() + seconds
    while compaction["status"] in ("queued", "running") and time.monotonic() < deadline:
        time.sleep(0.3)
        compaction = api.call("GET", f"/api/v1/compactions/{compaction['id']}/")[1]
    assert compaction["status"] == "succeeded", {k: compaction.get(k) for k in ("status", "error", "notes")}
    return compaction
