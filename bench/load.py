"""Load with auto-compaction on: many agents writing while workers compact, then integrity checks.

    .venv/bin/python bench/load.py [--agents 50] [--messages 200] [--window 12000] [--web 4] [--workers 2]
                                   [--pause 0.2-1]

With ``--pause MIN-MAX`` each agent waits a random MIN–MAX seconds between its appends, as an agent
waiting on its model does (an open load); without it the agents append back to back (a closed loop).

Runs gunicorn (4 workers) + 2 Celery workers on a fresh Postgres database and Redis, and drives
N concurrent simulated agents, each posting M messages one by one over real HTTP (keep-alive), with
contents replayed from the shared Claude Code transcripts (tool ids made unique per agent) and a
status read every 10th message. Windows are small, so compactions run while agents write.

Afterwards, straight from the database: every message an agent got a 201 for is stored exactly once,
seqs are gapless, cached totals equal the sums over the rows, no two compactions of one session
overlapped in time, and nobody got a 5xx. Prints PASS/FAIL per check, throughput, and p50/p95/p99
latency per endpoint; exits 1 on any FAIL.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._cpu import cpu_by_kind, report, settled
from bench._server import PG, ROOT, Client, gunicorn_on_postgres, make_key
from compaction.transcripts import read_transcript

SHARED = Path(os.environ.get("CTX_SHARED_DATA") or ROOT.parent / "shared" / "data")
REDIS = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")


def conversations() -> list[list[dict[str, Any]]]:
    """The main conversations of the shared Claude Code transcripts, as message dicts."""
    found = []
    for path in sorted((SHARED / "claude_code").glob("*.jsonl")):
        transcript = read_transcript(path.read_bytes(), "claude-code")
        for conv in transcript.conversations:
            if not conv.sidechain and len(conv.messages) >= 4:
                found.append([{"role": m["role"], "content": m["content"]} for m in conv.messages])
    if not found:
        raise SystemExit(f"no Claude Code transcripts under {SHARED} (set CTX_SHARED_DATA)")
    return found


def _rename_ids(content: Any, prefix: str) -> Any:
    if isinstance(content, str):
        return content
    out = []
    for block in content:
        block = dict(block)
        if block.get("type") == "tool_use":
            block["id"] = prefix + block["id"]
        elif block.get("type") == "tool_result":
            block["tool_use_id"] = prefix + block["tool_use_id"]
        out.append(block)
    return out


def script_for(agent: int, pool: list[list[dict[str, Any]]], count: int) -> list[dict[str, Any]]:
    """``count`` messages for one agent: whole conversations in turn, tool ids unique to the agent."""
    messages: list[dict[str, Any]] = []
    c = agent
    while len(messages) < count:
        conv = pool[c % len(pool)]
        prefix = f"a{agent}c{c}_"
        messages += [{"role": m["role"], "content": _rename_ids(m["content"], prefix)} for m in conv]
        c += 1
    return messages[:count]


class Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.statuses: Counter[int] = Counter()
        self.acknowledged: set[str] = set()
        self.errors: list[str] = []

    def record(self, endpoint: str, seconds: float, status: int) -> None:
        with self.lock:
            self.latency[endpoint].append(seconds)
            self.statuses[status] += 1


def run_agent(
    hostport: str,
    key: str,
    project: int,
    agent: int,
    script: list[dict],
    window: int,
    rec: Recorder,
    pause: tuple[float, float] | None = None,
):
    client = Client(hostport, key)
    pauses = random.Random(agent)  # the same waits on every run
    t0 = time.perf_counter()
    status, session = client.call(
        "POST",
        "/api/v1/sessions/",
        {"project": project, "name": f"agent {agent}", "model": "claude-sonnet-4-5", "context_window": window},
    )
    rec.record("POST /sessions/", time.perf_counter() - t0, status)
    if status != 201:
        rec.errors.append(f"agent {agent}: session create answered {status}: {session}")
        return
    sid = session["id"]
    for i, message in enumerate(script):
        if pause is not None:
            time.sleep(pauses.uniform(*pause))
        body = {**message, "client_id": f"agent{agent}-{i}"}
        for _attempt in range(3):  # a retry with the same client_id must not store twice
            t0 = time.perf_counter()
            try:
                status, answer = client.call("POST", f"/api/v1/sessions/{sid}/messages/", body)
            except (OSError, ConnectionError) as exc:
                rec.errors.append(f"agent {agent} message {i}: {type(exc).__name__}")
                client = Client(hostport, key)
                continue
            rec.record("POST /messages/", time.perf_counter() - t0, status)
            if status == 201:
                with rec.lock:
                    rec.acknowledged.add(body["client_id"])
                break
            if status < 500 and status != 429:
                rec.errors.append(f"agent {agent} message {i}: {status} {answer}")
                break
        if i % 10 == 9:
            t0 = time.perf_counter()
            status, _ = client.call("GET", f"/api/v1/sessions/{sid}/status/")
            rec.record("GET /status/", time.perf_counter() - t0, status)


def start_workers(env: dict[str, str], n: int, stack: ExitStack) -> None:
    """``n`` workers, each serving the three queues of the run's CTX_QUEUE_PREFIX."""
    for k in range(n):
        log = open(ROOT / "test-artifacts" / f"load-worker-{k}.log", "w")  # noqa: SIM115
        stack.callback(log.close)
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "ctxweb", "worker", "--pool=solo",
             "-n", f"load{k}@%h", "--without-gossip", "--without-mingle", "--loglevel=WARNING"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip

        def stop(p: subprocess.Popen[bytes] = proc) -> None:
            p.terminate()
            p.wait(timeout=30)

        stack.callback(stop)


def sql(db_url: str, query: str) -> list[tuple]:
    import psycopg

    with psycopg.connect(db_url) as conn:
        return conn.execute(query).fetchall()


def connections_opened(db_url: str, db: str) -> int:
    """Connections (backends) the server has started for ``db`` so far: each costs a process fork."""
    return sql(db_url, f"SELECT sessions FROM pg_stat_database WHERE datname = '{db}'")[0][0]


def wait_for_compactions(db_url: str, seconds: float = 180) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pending = sql(db_url, "SELECT count(*) FROM sessions_app_compaction WHERE status IN ('queued','running')")[0][0]
        if not pending:
            return 0
        time.sleep(1)
    return pending


def checks(db_url: str, rec: Recorder) -> list[tuple[str, bool, str]]:
    results = []
    stored = dict(
        sql(db_url, "SELECT client_id, count(*) FROM sessions_app_message WHERE client_id IS NOT NULL GROUP BY 1")
    )
    missing = [c for c in rec.acknowledged if c not in stored]
    doubled = [c for c, n in stored.items() if n > 1]
    results.append(
        (
            "every acknowledged message stored exactly once",
            not missing and not doubled,
            f"{len(rec.acknowledged):,} acknowledged, {len(stored):,} stored, "
            f"{len(missing)} missing, {len(doubled)} doubled",
        )
    )
    gaps = sql(
        db_url,
        """SELECT s.id, s.last_seq, count(m.id), coalesce(max(m.seq), 0) FROM sessions_app_agentsession s
           LEFT JOIN sessions_app_message m ON m.session_id = s.id GROUP BY s.id, s.last_seq
           HAVING count(m.id) <> coalesce(max(m.seq), 0) OR s.last_seq <> coalesce(max(m.seq), 0)""",
    )
    results.append(("seqs gapless, last_seq = max(seq)", not gaps, f"{len(gaps)} sessions with gaps"))
    wrong = sql(
        db_url,
        """SELECT s.id FROM sessions_app_agentsession s LEFT JOIN sessions_app_message m ON m.session_id = s.id
           GROUP BY s.id, s.message_tokens, s.active_message_count, s.message_count
           HAVING s.message_tokens <> coalesce(sum(m.tokens) FILTER (WHERE m.state IN ('active','compacted')), 0)
               OR s.active_message_count <> count(m.id) FILTER (WHERE m.state IN ('active','compacted'))
               OR s.message_count <> count(m.id)""",
    )
    results.append(("cached totals equal the sums over the rows", not wrong, f"{len(wrong)} sessions off"))
    overlaps = sql(
        db_url,
        """SELECT a.id, b.id FROM sessions_app_compaction a JOIN sessions_app_compaction b
           ON a.session_id = b.session_id AND a.id < b.id
           WHERE a.started_at IS NOT NULL AND b.started_at IS NOT NULL
             AND a.started_at < coalesce(b.finished_at, now()) AND b.started_at < coalesce(a.finished_at, now())""",
    )
    by_status = dict(sql(db_url, "SELECT status, count(*) FROM sessions_app_compaction GROUP BY 1"))
    results.append(
        ("no two compactions of one session overlapped", not overlaps, f"{len(overlaps)} overlaps; {by_status}")
    )
    five = sum(n for s, n in rec.statuses.items() if s >= 500)
    results.append(("no 5xx", five == 0, f"{five} of {sum(rec.statuses.values()):,} responses"))
    results.append(("no client errors", not rec.errors, "; ".join(rec.errors[:3]) or "none"))
    return results


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def _pause(text: str) -> tuple[float, float]:
    low, _, high = text.partition("-")
    try:
        bounds = (float(low), float(high or low))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give seconds as MIN-MAX, e.g. 0.2-1") from None
    if not 0 <= bounds[0] <= bounds[1]:
        raise argparse.ArgumentTypeError(f"{text!r}: need 0 <= MIN <= MAX")
    return bounds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--window", type=int, default=12_000)
    parser.add_argument("--web", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--pause", type=_pause, default=None, help="seconds between an agent's appends, MIN-MAX")
    args = parser.parse_args()
    (ROOT / "test-artifacts").mkdir(exist_ok=True)
    pool = conversations()
    scripts = [script_for(a, pool, args.messages) for a in range(args.agents)]
    extra = {"REDIS_URL": REDIS, "CTX_QUEUE_PREFIX": f"load-{os.getpid()}-", "CELERY_TASK_ALWAYS_EAGER": "0"}
    db = "ctxweb_bench_load"
    with ExitStack() as stack:
        hostport, env = stack.enter_context(gunicorn_on_postgres(db, workers=args.web, extra_env=extra))
        start_workers(env, args.workers, stack)
        key = make_key(env)
        status, project = Client(hostport, key).call("POST", "/api/v1/projects/", {"name": "load"})
        assert status == 201, project
        rec = Recorder()
        threads = [
            threading.Thread(
                target=run_agent, args=(hostport, key, project["id"], a, scripts[a], args.window, rec, args.pause)
            )
            for a in range(args.agents)
        ]
        settled()  # the workers have loaded what they load at start
        opened_before = connections_opened(f"{PG}/{db}", db)
        cpu_before = cpu_by_kind()
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - t0
        cpu_after = cpu_by_kind()  # before the wait below: compactions still running then count in neither
        opened = connections_opened(f"{PG}/{db}", db) - opened_before
        pending = wait_for_compactions(f"{PG}/{db}")
        results = checks(f"{PG}/{db}", rec)
        results.append(("compactions finished after the load", pending == 0, f"{pending} still queued or running"))
    total = sum(len(v) for v in rec.latency.values())
    paced = f"pauses {args.pause[0]}–{args.pause[1]} s" if args.pause else "closed loop"
    print(
        f"{args.agents} agents × {args.messages} messages ({paced}), window {args.window:,}, gunicorn ×{args.web}, "
        f"workers ×{args.workers}: {elapsed:.1f} s, {total / elapsed:.0f} requests/s, "
        f"{len(rec.acknowledged) / elapsed:.0f} messages/s"
    )
    print(f"{'endpoint':20} {'n':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
    for endpoint, values in sorted(rec.latency.items()):
        print(
            f"{endpoint:20} {len(values):7,} {statistics.median(values) * 1000:8.1f} "
            f"{percentile(values, 95) * 1000:8.1f} {percentile(values, 99) * 1000:8.1f}"
        )
    print("\n".join(report(cpu_before, cpu_after, requests=total, wall=elapsed)))
    print(f"Postgres connections opened during the load: {opened:,} ({opened / max(total, 1):.2f} per request)")
    for name, ok, detail in results:
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")
    print(json.dumps({"statuses": dict(rec.statuses)}))
    return 0 if all(ok for _, ok, _ in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
