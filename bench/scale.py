"""A team's months of history: what each request costs at 10k, 100k and 1M stored messages.

    .venv/bin/python bench/scale.py [--stages 10000,100000,1000000] [--repeat 7] [--explain]

A fresh Postgres database (``BENCH_SCALE_DB``, default ``ctxweb_bench_scale``, on ``BENCH_PG``)
served by gunicorn, Redis as the cache. Stage one holds one 10,000-message
session and 150 of two messages; each later stage adds sessions of 20–180 messages (agent-like sizes, ~1 kB on average,
loaded with COPY: tool calls indexed, running totals set) until the stage's total is stored, a fifth
of them in one big project, the rest over 49 others (10,000 sessions at 1M, ~2,000 in the big
project). After ANALYZE (and VACUUM ANALYZE of the sessions after the relevel job), at each stage
it measures over HTTP (medians of ``--repeat``): single
appends (p50/p99 of 200), STATUS, the 10,000-message session's context and page (time and bytes),
the big project's page with and without filters, admin's change lists; and in-process the pruner's
plan and run (a tenth of each stage's new sessions were quiet for 40 days), a compaction of the
10,000-message session (then reverted) and the relevel job over every session (a tenth of the new
sessions hold a succeeded compaction with ten backed-up messages). Each stage also loads provider
requests (COPY, about one per two messages: the big session's 5,000 at stage one, then ``count // 2``
per new session) spread over 30 days, over 6 people, 12 API keys and 4 models, each with its cost;
and measures the spend over them: ``GET /projects/{id}/spend/?by=day|owner|key|model``, the
dashboard's API, the 10,000-message session's per-request list (first page and page 90), and search (a
rare word and a common one, in the big session and over the big project). Prints one table, with each
cost at the last stage as a ratio of the first (target ≤ 1.3). ``--explain`` runs every query the
measured requests make under EXPLAIN at the last stage and lists sequential scans of the big tables.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import re
import statistics
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._server import Client, gunicorn_on_postgres
from bench.ingest import realistic_messages
from bench.scale_requests import PEOPLE, REQUEST_DAYS, copy_requests

BIG_TABLES = ("sessions_app_message", "sessions_app_tooluse", "sessions_app_messagebackup", "sessions_app_compaction",
              "sessions_app_providerrequest")  # fmt: skip
DEEP_PAGE = 90  # of the big session's 5,000 requests, 50 a page
PROJECTS = 50
APPENDS = 200
RARE_CODES = 5_000


class Web(Client):
    """A browser's session cookie instead of an API key."""

    def __init__(self, hostport: str, cookie: str) -> None:
        super().__init__(hostport, "")
        self.headers = {"Cookie": cookie}

    def page(self, path: str) -> tuple[int, int]:
        self.conn.request("GET", path, headers=self.headers)
        resp = self.conn.getresponse()
        return resp.status, len(resp.read())


def setup_django(env: dict[str, str]) -> None:
    names = ("DATABASE_URL", "SECRET_KEY", "DEBUG", "REDIS_URL", "CELERY_TASK_ALWAYS_EAGER")
    os.environ.update({k: env[k] for k in names if k in env})
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")
    import django

    django.setup()


def make_team() -> dict[str, Any]:
    from django.contrib.auth import get_user_model
    from django.contrib.sessions.backends.db import SessionStore

    from sessions_app.services import agent_sessions, keys, projects

    user = get_user_model().objects.create_superuser("scale", "scale@example.invalid", "scale-pass-123")
    _, key = keys.apikey_create(user=user)
    store = SessionStore()
    store["_auth_user_id"], store["_auth_user_backend"] = str(user.pk), "django.contrib.auth.backends.ModelBackend"
    store["_auth_user_hash"] = user.get_session_auth_hash()
    store.create()
    made = [projects.project_create(user=user, name=f"team {i}") for i in range(PROJECTS)]
    big = agent_sessions.session_create(user=user, project=made[0], name="ten thousand", external_id="big-10k")
    appender = agent_sessions.session_create(
        user=user, project=made[1], name="appender", context_window=100_000_000, auto_compact=False
    )
    people = [get_user_model().objects.create_user(f"person{n}") for n in range(PEOPLE)]
    callers = [
        (person.pk, keys.apikey_create(user=person, name=f"laptop {k}")[0].pk) for person in people for k in (1, 2)
    ]
    return {"user": user, "key": key, "cookie": f"sessionid={store.session_key}", "projects": made,
            "big": big, "appender": appender, "callers": callers}  # fmt: skip


def copy_messages(session_sizes: list[tuple[int, int, int]], rng: random.Random, *, quiet_days: int = 0) -> None:
    """COPY ``(session id, first seq, count)`` worth of messages and their tool calls; set the totals."""
    from django.db import connection
    from django.utils import timezone

    now = timezone.now() - timedelta(days=quiet_days)
    messages, uses = io.StringIO(), io.StringIO()
    touched = []
    for session_id, first, count in session_sizes:
        touched.append(session_id)
        for offset, message in enumerate(realistic_messages(count, rng, start=first)):
            seq = first + offset
            content = message["content"]
            if isinstance(content, str):  # a rare word for search: each code in one message of ~5,000
                content = f"{content} (errcode{rng.randrange(RARE_CODES)})"
            text = json.dumps(content)
            tokens = max(1, len(text) // 4)
            client_id = f"s{session_id}-{seq}"
            if isinstance(content, list):
                ids = {b["id"] for b in content if b.get("type") == "tool_use"}
                for block in content:  # ids unique per session
                    if block.get("type") == "tool_use":
                        block["id"] = f"{block['id']}-{session_id}"
                    elif block.get("type") == "tool_result":
                        block["tool_use_id"] = f"{block['tool_use_id']}-{session_id}"
                text = json.dumps(content)
                uses.writelines(f"{session_id}\t{tid}-{session_id}\t{seq}\n" for tid in ids)
            at = (now - timedelta(seconds=count - offset)).isoformat()
            messages.write(
                "\t".join([str(session_id), str(seq), message["role"], _copy_text(text), str(tokens), client_id,
                           "active", "{}", at, at]) + "\n"
            )  # fmt: skip
    with connection.cursor() as cursor:
        raw = cursor.cursor
        with raw.copy(
            "COPY sessions_app_message (session_id, seq, role, content, tokens, client_id, state, metadata, "
            "created_at, received_at) FROM STDIN"
        ) as copy:
            copy.write(messages.getvalue())
        with raw.copy("COPY sessions_app_tooluse (session_id, tool_use_id, seq) FROM STDIN") as copy:
            copy.write(uses.getvalue())
        cursor.execute(
            """UPDATE sessions_app_agentsession s
                  SET last_seq = m.last, message_count = m.n, active_message_count = m.n,
                      message_tokens = m.tokens, last_activity_at = m.at,
                      level = '', usage_percent = NULL  -- as loaded by an older version: relevel works them out
                 FROM (SELECT session_id, max(seq) AS last, count(*) AS n, sum(tokens) AS tokens,
                              max(created_at) AS at
                         FROM sessions_app_message WHERE session_id = ANY(%s) GROUP BY 1) m
                WHERE s.id = m.session_id""",
            [touched],
        )


def _copy_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def grow(team: dict[str, Any], total: int, rng: random.Random) -> int:
    """Add sessions until ``total`` messages are stored; how many sessions were added."""
    from django.db import connection

    from sessions_app.models import AgentSession

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM sessions_app_message")
        stored = cursor.fetchone()[0]
    sizes, made = [], 0
    if stored == 0:
        copy_messages([(team["big"].pk, 1, 10_000)], rng)
        copy_requests([(team["big"].pk, team["projects"][0].pk, 5_000)], team["callers"], rng)
        # And enough small sessions that every list has a second page from the first stage on.
        sizes = [(team["projects"][0 if i % 5 == 0 else 1 + i % (PROJECTS - 1)], 2) for i in range(150)]
        stored, made = 10_300, 150
    while stored < total:
        count = min(total - stored, rng.randint(20, 180))  # ~100 on average: 10,000 sessions at 1M
        project = team["projects"][0 if made % 5 == 0 else 1 + made % (PROJECTS - 1)]
        sizes.append((project, count))
        stored += count
        made += 1
    rows = AgentSession.objects.bulk_create(
        AgentSession(project=p, owner=team["user"], name=f"agent {rng.randrange(10**6)}", model="claude-sonnet-4-5")
        for p, _ in sizes
    )
    quiet = {row.pk for i, row in enumerate(rows) if i % 10 == 9}
    plan = [(row.pk, 1, count) for row, (_, count) in zip(rows, sizes, strict=True)]
    for k in range(0, len(plan), 500):  # bounded memory per COPY
        batch = plan[k : k + 500]
        copy_messages([p for p in batch if p[0] not in quiet], rng)
        copy_messages([p for p in batch if p[0] in quiet], rng, quiet_days=40)
    requests = [(row.pk, row.project_id, count // 2) for row, (_, count) in zip(rows, sizes, strict=True)]
    for k in range(0, len(requests), 2_000):  # bounded memory per COPY
        copy_requests(requests[k : k + 2_000], team["callers"], rng)
    add_compactions([row.pk for i, row in enumerate(rows) if i % 10 == 4])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return len(rows)


def add_compactions(session_ids: list[int]) -> None:
    """A succeeded compaction per session given, with backups of its first ten messages (what the
    history, the dashboard and the pruner read besides the messages): ~1,000 and ~10,000 at 1M."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO sessions_app_compaction (session_id, project_id, level, status, trigger, instructions,
                      upto_seq, items, tokens_before, tokens_after, error, notes, attempts, created_at,
                      started_at, finished_at, revertible_until)
               SELECT id, project_id, 'compact', 'succeeded', 'auto', '', 10, '[]', message_tokens + 1000,
                      message_tokens, '', '[]', 1, now(), now(), now(), now() + interval '7 days'
                 FROM sessions_app_agentsession WHERE id = ANY(%s)""",
            [session_ids],
        )
        cursor.execute(
            """INSERT INTO sessions_app_messagebackup (compaction_id, message_id, content, tokens, state, created_at)
               SELECT c.id, m.id, m.content, m.tokens, 'active', now()
                 FROM sessions_app_compaction c JOIN sessions_app_message m ON m.session_id = c.session_id
                WHERE c.session_id = ANY(%s) AND m.seq <= 10""",
            [session_ids],
        )
        cursor.execute(
            """UPDATE sessions_app_message m SET compaction_id = c.id FROM sessions_app_compaction c
                WHERE c.session_id = ANY(%s) AND m.session_id = c.session_id AND m.seq <= 10""",
            [session_ids],
        )


def relevel() -> tuple[float, str]:
    """The relevel job, as beat runs it after an upgrade (the loaded sessions have no stored level)."""
    from sessions_app.models import AgentSession
    from sessions_app.services import auto_compaction

    t0 = time.perf_counter()
    moved = auto_compaction.sessions_relevel().moved
    return (time.perf_counter() - t0) * 1000, f"{moved:,} of {AgentSession.objects.count():,} moved"


def median_ms(call: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = call()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), out


def measure(api: Client, web: Web, team: dict[str, Any], repeat: int, stage: int) -> dict[str, tuple[float, str]]:
    from sessions_app.services import compaction_runs, retention, reverting

    big, p0 = team["big"].pk, team["projects"][0].pk
    out: dict[str, tuple[float, str]] = {}
    times = []
    for i in range(APPENDS):
        t0 = time.perf_counter()
        message = {"role": "user", "content": f"step {i} of stage {stage}", "client_id": f"{stage}-{i}"}
        status, _ = api.call("POST", f"/api/v1/sessions/{team['appender'].pk}/messages/", message)
        assert status == 201, status
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    out["append p50"] = (statistics.median(times), "")
    out["append p99"] = (times[int(len(times) * 0.99) - 1], "")
    out["status (10,000 msgs)"] = (median_ms(lambda: api.call("GET", f"/api/v1/sessions/{big}/status/"), repeat)[0], "")

    def sized(path: str) -> tuple[float, str]:
        ms, (status, size) = median_ms(lambda: web.page(path), repeat)
        assert status == 200, (path, status)
        return ms, f"{size / 1024:,.0f} kB"

    out["context (10,000 msgs)"] = sized(f"/api/v1/sessions/{big}/context/")
    # The dashboard's cost is cached per session version: the first view after a stage's load reads
    # the history of every session it has not seen; the views after it, of those that changed.
    t0 = time.perf_counter()
    assert web.page(f"/projects/{p0}/")[0] == 200
    out["project page, first view"] = ((time.perf_counter() - t0) * 1000, "")
    out["session page (10,000 msgs)"] = sized(f"/sessions/{big}/")
    for label, query in (("", ""), (" ?page=2", "?page=2"), (" ?status=active", "?status=active"),
                         (" ?q=agent", "?q=agent"), (" ?level=ok", "?level=ok")):  # fmt: skip
        out[f"project page{label}"] = sized(f"/projects/{p0}/{query}")
    for label, path in (("messages", "message/"), ("messages ?role=user", "message/?role=user"),
                        ("messages ?q=big-10k", "message/?q=big-10k"), ("compactions", "compaction/"),
                        ("sessions", "agentsession/")):  # fmt: skip
        out[f"admin {label}"] = sized(f"/admin/sessions_app/{path}")

    def answered(path: str) -> tuple[float, str]:
        ms, (status, body) = median_ms(lambda: api.call("GET", path), repeat)
        assert status == 200, (path, status, body)
        rows = body.get("results", body.get("rows")) if isinstance(body, dict) else None
        return ms, f"{len(rows)} rows" if isinstance(rows, list) else ""

    out["dashboard API"] = answered(f"/api/v1/projects/{p0}/dashboard/")
    for by in ("day", "owner", "key", "model"):
        out[f"spend ?by={by} (30 days)"] = answered(f"/api/v1/projects/{p0}/spend/?days={REQUEST_DAYS}&by={by}")
    out["requests (10,000 msgs) page 1"] = answered(f"/api/v1/sessions/{big}/requests/")
    out[f"requests (10,000 msgs) page {DEEP_PAGE}"] = answered(f"/api/v1/sessions/{big}/requests/?page={DEEP_PAGE}")
    # Search: a rare word (one message in ~5,000 holds each code) and a word nearly every message holds,
    # in the 10,000-message session and over the big project.
    for label, word in (("rare word", "errcode42"), ("common word", "branch")):
        out[f"search session (10,000 msgs), {label}"] = answered(f"/api/v1/search/?q={word}&session={big}")
        out[f"search project, {label}"] = answered(f"/api/v1/search/?q={word}&project={p0}")
    out["pruner plan"] = (median_ms(lambda: retention.prune_plan(), 3)[0], "")
    t0 = time.perf_counter()
    done = retention.prune_run()
    archived = max(done["sessions_archived"], 1)
    out["pruner run, per session"] = ((time.perf_counter() - t0) * 1000 / archived, f"{archived} sessions")
    record = compaction_runs.compaction_request(session=team["big"], level="compact", user=None)
    t0 = time.perf_counter()
    result = compaction_runs.compaction_run(record.pk)
    out["compaction (10,000 msgs)"] = ((time.perf_counter() - t0) * 1000, result)
    record.refresh_from_db()
    if record.status == "succeeded":
        reverting.compaction_revert(compaction=record)
    return out


def explain(web_paths: list[str], api_paths: list[str], key: str, cookie_user: Any) -> list[str]:
    """Every query the given requests make, under EXPLAIN: the sequential scans of the big tables."""
    from django.db import connection
    from django.test import Client as DjangoClient
    from django.test.utils import CaptureQueriesContext

    browser = DjangoClient(HTTP_HOST="127.0.0.1")
    browser.force_login(cookie_user)
    agent = DjangoClient(HTTP_HOST="127.0.0.1", HTTP_AUTHORIZATION=f"Bearer {key}")
    found = []
    for client, path in [(browser, p) for p in web_paths] + [(agent, p) for p in api_paths]:
        with CaptureQueriesContext(connection) as queries:
            client.get(path)
        for query in queries.captured_queries:
            sql = query["sql"]
            if not sql.lstrip().upper().startswith("SELECT"):
                continue
            with connection.cursor() as cursor:
                cursor.execute("EXPLAIN " + sql)
                plan = "\n".join(row[0] for row in cursor.fetchall())
            for table in sorted(set(re.findall(r"Seq Scan on (\w+)", plan)) & set(BIG_TABLES)):
                found.append(f"{path}: Seq Scan on {table}: {' '.join(sql.split())[:160]}")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stages", default="10000,100000,1000000")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--explain", action="store_true")
    args = parser.parse_args()
    stages = [int(s) for s in args.stages.split(",")]
    rng = random.Random(16)
    results: dict[int, dict[str, tuple[float, str]]] = {}
    # Redis as the cache, as in production (tasks still run in-process: no compaction is queued here).
    redis = {"REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/11"), "CELERY_TASK_ALWAYS_EAGER": "1"}
    database = os.environ.get("BENCH_SCALE_DB", "ctxweb_bench_scale")  # another name: runs side by side
    with gunicorn_on_postgres(database, workers=2, extra_env=redis) as (hostport, env):
        setup_django(env)
        from django.db import connection

        team = make_team()
        api, web = Client(hostport, team["key"]), Web(hostport, team["cookie"])
        for stage in stages:
            t0 = time.perf_counter()
            added = grow(team, stage, rng)
            print(f"stage {stage:,}: {added:,} sessions added, loaded in {time.perf_counter() - t0:.0f} s", flush=True)
            job = relevel()
            with connection.cursor() as cursor:
                # The relevel job rewrote every session row after grow()'s ANALYZE; autovacuum would
                # vacuum and analyze the table within a minute of such an update (it holds more than
                # 20 % dead rows): done here, so the stage is measured as a running server has it.
                cursor.execute("VACUUM ANALYZE sessions_app_agentsession")
            results[stage] = measure(api, web, team, args.repeat, stage)
            results[stage]["relevel job (all sessions)"] = job
        scans = []
        if args.explain:
            p0, big = team["projects"][0].pk, team["big"].pk
            web_paths = [f"/projects/{p0}/", f"/projects/{p0}/?page=2", f"/projects/{p0}/?level=ok",
                         f"/projects/{p0}/?q=agent", f"/sessions/{big}/", "/admin/sessions_app/message/",
                         "/admin/sessions_app/message/?role=user", "/admin/sessions_app/message/?q=big-10k",
                         "/admin/sessions_app/compaction/"]  # fmt: skip
            api_paths = [f"/api/v1/sessions/{big}/status/", f"/api/v1/sessions/{big}/context/",
                         f"/api/v1/sessions/{big}/messages/", "/api/v1/sessions/?project=" + str(p0),
                         f"/api/v1/projects/{p0}/dashboard/", f"/api/v1/sessions/{big}/requests/",
                         f"/api/v1/sessions/{big}/requests/?page={DEEP_PAGE}",
                         *(f"/api/v1/projects/{p0}/spend/?days={REQUEST_DAYS}&by={by}"
                           for by in ("day", "owner", "key", "model"))]  # fmt: skip
            scans = explain(web_paths, api_paths, team["key"], team["user"])
    first, last = stages[0], stages[-1]
    print(f"\n{'request':32}" + "".join(f"{f'{s:,} msgs':>18}" for s in stages) + f"{'ratio':>8}")
    for name in results[first]:
        cells = "".join(f"{results[s][name][0]:>10.1f} ms{results[s][name][1][:5]:>6}" for s in stages)
        ratio = results[last][name][0] / max(results[first][name][0], 0.01)
        print(f"{name:32}{cells}{ratio:>8.2f}")
    for name in results[first]:
        notes = {s: results[s][name][1] for s in stages if results[s][name][1]}
        if notes:
            print(f"  {name}: " + ", ".join(f"{s:,}: {note}" for s, note in notes.items()))
    if args.explain:
        print(f"\nsequential scans of {', '.join(BIG_TABLES)} at {last:,} messages: {len(scans)}")
        for line in scans:
            print("  " + line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
