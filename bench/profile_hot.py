"""Where the CPU of the two hot paths goes, step by step: a single append and a proxied exchange.

    .venv/bin/python bench/profile_hot.py [--appends 300] [--agents 4] [--turns 30] [--out DIR]

A fresh Postgres database, Redis as cache and broker (follow-ups are queued, as in production, not
run), the fake Anthropic upstream in its own process. In this process, through Django's whole stack
(the WSGI handler and every middleware, as gunicorn calls it, without the socket): ``--appends``
single appends of agent-like messages (``bench/ingest.py``), then ``--agents`` streamed
conversations of ``--turns`` turns through the proxy, each resending its growing history (as
``bench/proxy.py``). py-spy samples every thread of the process (the proxy records on threads of
its own) at 1 kHz, on CPU only; each sample counts for the innermost step it is in (below). Prints,
per path, CPU ms per request (process time, less what encoding the clients' JSON bodies took: the
client's work, done in this process) and each step's share; writes each path's stacks
(py-spy's collapsed format: ``flamegraph.pl`` or speedscope.app draw them) to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._server import PG, _psql  # noqa: E402
from bench.ingest import realistic_messages  # noqa: E402
from bench.proxy import REPLY, turn  # noqa: E402

RATE = 1000  # samples a second
# Steps: a sample counts for the innermost frame on its stack that one of these names (a function,
# or None for any function of the file, and a part of the file's path). The rest of a request
# (Django's handler, middleware, DRF's dispatch, the view's own lines) is "Django, DRF, the view".
STEPS: list[tuple[str, str | None, str]] = [
    ("SQL: compile (ORM)", "as_sql", "django/db/models/sql/compiler.py"),
    ("SQL: compile (ORM)", "pre_sql_setup", "django/db/models/sql/compiler.py"),
    ("SQL: send and wait", "_execute", "django/db/backends/utils.py"),
    ("SQL: send and wait", "_executemany", "django/db/backends/utils.py"),
    ("SQL: commit, autocommit", None, "django/db/backends/base/base.py"),
    ("ORM: build querysets", None, "django/db/models/sql/query.py"),
    ("ORM: build querysets", None, "django/db/models/query_utils.py"),
    ("ORM: rows to objects", "from_db", "django/db/models/base.py"),
    ("ORM: rows to objects", "__iter__", "django/db/models/query.py"),
    ("ORM: model save", "save", "django/db/models/base.py"),
    ("metrics (Redis)", None, "sessions_app/metrics.py"),
    ("queue a task (Celery, Redis)", "apply_async", "celery/app/task.py"),
    ("queue a task (Celery, Redis)", "send_task", "celery/app/base.py"),
    ("cache (Redis)", None, "ctxweb/cache.py"),
    ("cache (Redis)", None, "django_redis/"),
    ("redaction", "redact", "compaction/redact.py"),
    ("token counting", None, "compaction/tokens.py"),
    ("validation (normalize)", None, "compaction/messages.py"),
    ("JSON parse", "parse", "sessions_app/api/parsers.py"),
    ("JSON render", "render", "rest_framework/renderers.py"),
    ("response serializers", "data", "rest_framework/serializers.py"),
    ("authentication", "authenticate", "sessions_app/api/auth.py"),
    ("throttling", None, "sessions_app/api/throttling.py"),
    ("session lookup", "session_get_for", "sessions_app/selectors/access.py"),
    ("STATUS", "session_status", "sessions_app/selectors/usage.py"),
    ("store (lock, insert, totals)", "message_append", "sessions_app/services/ingest.py"),
    ("proxy: find the session", None, "sessions_app/services/proxy/sessions.py"),
    ("proxy: find the session", None, "sessions_app/services/proxy/identity.py"),
    ("proxy: record", "_work", "sessions_app/api/proxy/recorder.py"),
    ("proxy: upstream request", None, "httpx2/"),
    ("proxy: upstream request", None, "httpcore2/"),
    ("proxy: the request's body", None, "sessions_app/api/proxy/body.py"),
    ("proxy: the reply's stream", None, "sessions_app/api/proxy/stream.py"),
    ("proxy: the reply's stream", None, "sessions_app/api/proxy/exchange.py"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--appends", type=int, default=300)
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--out", type=Path, default=Path("/tmp/ctxweb-profile"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    db = "ctxweb_bench_profile"
    _psql(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)", PG)
    _psql(f"CREATE DATABASE {db}", PG)
    from tests.fakes.anthropic_server import FakeAnthropicProcess

    with FakeAnthropicProcess() as fake:
        fake.script(action="set_event_interval", seconds=0.0)
        fake.script(action="set_default_reply", text=REPLY)  # what the agents send back as the model's turn
        os.environ.update(
            {
                "DATABASE_URL": f"{PG}/{db}",
                "REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
                "DEBUG": "0",
                "LOG_LEVEL": "WARNING",
                "SECRET_KEY": "bench-only-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz",
                "CTX_RATE_LIMIT_KEY": "",
                "CTX_RATE_LIMIT_USER": "",
                "CTX_PROXY_UPSTREAM_URL": fake.base_url,
                "DJANGO_SETTINGS_MODULE": "ctxweb.settings",
            }
        )
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True)
        import django

        django.setup()
        try:
            run(args)
        finally:
            from django.db import connections

            connections.close_all()
            _psql(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)", PG)


def run(args: argparse.Namespace) -> None:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from sessions_app.services import keys, projects

    user = get_user_model().objects.create_user(username="profiler")
    project = projects.project_create(user=user, name="profile")
    _, key = keys.apikey_create(user=user, name="profile")
    api = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    made = api.post("/api/v1/sessions/", {"project": project.pk, "name": "append"}, content_type="application/json")
    session = made.json()["id"]
    messages = realistic_messages(2 * args.appends + 20, random.Random(3))

    def append(n: int) -> None:
        url = f"/api/v1/sessions/{session}/messages/"
        answer = api.post(url, _encoded(messages[n]), content_type="application/json")
        assert answer.status_code == 201, answer.content[:300]

    for n in range(20):  # warm: imports, caches, prepared plans
        append(2 * args.appends + n)

    def appends(round_: int) -> None:
        for n in range(args.appends):
            append(round_ * args.appends + n)

    report("append", args.appends, appends, args.out)

    proxy = Client(HTTP_X_API_KEY="sk-bench", HTTP_ANTHROPIC_VERSION="2023-06-01", HTTP_CTXWEB_API_KEY=key)

    def conversation(agent: int) -> None:
        history: list[dict[str, Any]] = []
        for n in range(args.turns):
            if history:
                history.append({"role": "assistant", "content": [{"type": "text", "text": REPLY}]})
            history.append(turn(agent, n))
            body = {"model": "claude-sonnet-4-5", "max_tokens": 512, "stream": True, "messages": history}
            answer = proxy.post(
                "/proxy/anthropic/v1/messages",
                _encoded(body),
                content_type="application/json",
                HTTP_CTXWEB_SESSION=f"profile-agent-{agent}",
            )
            assert answer.status_code == 200, answer.status_code
            b"".join(answer.streaming_content)  # type: ignore[attr-defined]

    conversation(999)  # warm
    exchanges = args.agents * args.turns

    def conversations(round_: int) -> None:
        for agent in range(args.agents):
            conversation(round_ * 100 + agent)

    report("proxy", exchanges, conversations, args.out)


def report(label: str, requests: int, work: Callable[[int], Any], out: Path) -> None:
    """Run ``work`` twice: plain (the CPU and query figures) and under py-spy (the steps' shares)."""
    from sessions_app.api.proxy.recorder import RECORDER

    queries = _count_queries()
    cpu0, wall0, queries0, client0 = time.process_time(), time.perf_counter(), queries[0], _CLIENT_CPU[0]
    work(0)
    RECORDER.idle(60)  # what the proxy's recorder threads still had to do counts too
    client = _CLIENT_CPU[0] - client0
    cpu, wall = time.process_time() - cpu0 - client, time.perf_counter() - wall0
    asked = queries[0] - queries0
    stacks = out / f"{label}.collapsed"
    spy = subprocess.Popen(
        [str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(os.getpid()), "--rate", str(RATE),
         "--format", "raw", "--output", str(stacks), "--threads", "--nonblocking"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    time.sleep(1.0)  # py-spy attached
    work(1)
    RECORDER.idle(60)
    spy.send_signal(signal.SIGINT)
    spy.wait(timeout=60)
    by_step = steps(stacks)
    total = sum(by_step.values()) or 1
    each, wall_each = cpu / requests * 1000, wall / requests * 1000
    print(f"\n{label}: {requests} requests, {each:.2f} ms CPU and {asked / requests:.1f} queries each "
          f"({wall_each:.2f} ms wall; the client's JSON encoding, "
          f"{client / requests * 1000:.2f} ms, left out)")  # fmt: skip
    for step, count in by_step.most_common():
        print(f"  {step:34} {count / total * 100:5.1f} %   {each * count / total:6.2f} ms")
    print(f"  stacks: {stacks}")


def _count_queries() -> list[int]:
    """A count of the SQL statements every thread's connections send from now on."""
    from django.db.backends import utils

    wrapper: Any = utils.CursorWrapper  # private methods the stubs don't list
    if not getattr(wrapper, "_profile_counted", False):
        execute, executemany = wrapper._execute, wrapper._executemany

        def counting_execute(self: Any, *args: Any) -> Any:
            _QUERIES[0] += 1
            return execute(self, *args)

        def counting_executemany(self: Any, *args: Any) -> Any:
            _QUERIES[0] += 1
            return executemany(self, *args)

        wrapper._execute, wrapper._executemany = counting_execute, counting_executemany
        wrapper._profile_counted = True
    return _QUERIES


_QUERIES = [0]  # statements sent (``_count_queries``); a list: the threads add to one place
_CLIENT_CPU = [0.0]  # seconds of CPU this process spent encoding the clients' bodies (not ctxweb's)


def _encoded(body: Any) -> bytes:
    """``body`` as the client sends it: its encoding is the client's work, timed apart (``_CLIENT_CPU``)."""
    started = time.thread_time()  # this thread's: the recorder threads go on meanwhile
    encoded = json.dumps(body).encode()
    _CLIENT_CPU[0] += time.thread_time() - started
    return encoded


def steps(stacks: Path) -> Counter[str]:
    """Samples per step from py-spy's collapsed stacks (``frame;frame;… count``, outermost first)."""
    counted: Counter[str] = Counter()
    for line in stacks.read_text(errors="replace").splitlines():
        path, _, count = line.rpartition(" ")
        if not path or not count.isdigit() or ("ctxweb" not in path and "django" not in path):
            continue  # the idle threads of libraries (py-spy counts only those on CPU; a few still show)
        frames = path.split(";")
        counted[_step(frames)] += int(count)
    return counted


def _step(frames: list[str]) -> str:
    for frame in reversed(frames):  # innermost first
        for step, function, part in STEPS:
            if part in frame and (function is None or frame.startswith(f"{function} (")):
                return step
    return "Django, DRF, the view"


if __name__ == "__main__":
    main()
