"""Ingest throughput and status latency, against gunicorn + Postgres.

    .venv/bin/python bench/ingest.py [--messages 10000] [--batch 100] [--clients 4]

Prints messages/s for batch appends (one client, and several clients on several sessions), and the
median status latency of a session holding 10 messages vs one holding 10,000 (status reads running
totals, so the ratio should stay near 1).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._server import Client, gunicorn_on_postgres, make_key

WORDS = [
    "the",
    "function",
    "returns",
    "error",
    "tests",
    "pass",
    "file",
    "path",
    "config",
    "value",
    "update",
    "user",
    "request",
    "session",
    "context",
    "token",
    "model",
    "tool",
    "output",
    "line",
    "build",
    "deploy",
    "commit",
    "branch",
]


def realistic_messages(n: int, rng: random.Random, start: int = 0) -> list[dict]:
    """Sizes like an agent's: short prompts, medium replies, long tool output (log-normal lengths)."""
    out: list[dict] = []
    for i in range(start, start + n):
        kind = i % 3
        words = int(min(4000, rng.lognormvariate(4.0 if kind != 2 else 5.2, 1.0)))
        text = " ".join(rng.choice(WORDS) for _ in range(max(1, words)))
        if kind == 0:
            out.append({"role": "user", "content": text, "client_id": f"m{i}"})
        elif kind == 1:
            out.append(
                {
                    "role": "assistant",
                    "client_id": f"m{i}",
                    "content": [
                        {"type": "text", "text": text[:400]},
                        {"type": "tool_use", "id": f"toolu_{i}", "name": "bash", "input": {"command": text[:80]}},
                    ],
                }
            )
        else:
            out.append(
                {
                    "role": "user",
                    "client_id": f"m{i}",
                    "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i - 1}", "content": text}],
                }
            )
    return out


def new_session(client: Client, project: int, name: str) -> int:
    status, body = client.call(
        "POST",
        "/api/v1/sessions/",
        {"project": project, "name": name, "context_window": 100_000_000, "auto_compact": False},
    )
    assert status == 201, body
    return body["id"]


def ingest(client: Client, session: int, messages: list[dict], batch: int) -> float:
    t0 = time.perf_counter()
    for k in range(0, len(messages), batch):
        status, body = client.call("POST", f"/api/v1/sessions/{session}/messages/", messages[k : k + batch])
        assert status == 201, (status, body)
    return time.perf_counter() - t0


def status_latency(client: Client, session: int, n: int = 300) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        status, _ = client.call("GET", f"/api/v1/sessions/{session}/status/")
        times.append(time.perf_counter() - t0)
        assert status == 200
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    rng = random.Random(7)

    with gunicorn_on_postgres("ctxweb_bench_ingest", workers=args.workers) as (hostport, env):
        key = make_key(env)
        client = Client(hostport, key)
        _, project = client.call("POST", "/api/v1/projects/", {"name": "bench"})
        pid = project["id"]

        small = new_session(client, pid, "ten")
        ingest(client, small, realistic_messages(10, rng), args.batch)
        big = new_session(client, pid, "ten-thousand")
        messages = realistic_messages(args.messages, rng)
        chars = sum(len(str(m["content"])) for m in messages)
        seconds = ingest(client, big, messages, args.batch)
        single_rate = len(messages) / seconds

        per_client = args.messages // args.clients
        sessions = [new_session(client, pid, f"parallel-{c}") for c in range(args.clients)]
        batches = [realistic_messages(per_client, random.Random(c)) for c in range(args.clients)]
        clients = [Client(hostport, key) for _ in range(args.clients)]
        threads = [
            threading.Thread(target=ingest, args=(clients[c], sessions[c], batches[c], args.batch))
            for c in range(args.clients)
        ]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        parallel_rate = per_client * args.clients / (time.perf_counter() - t0)

        status_latency(client, small, 30)  # warm up
        lat_small = status_latency(client, small)
        lat_big = status_latency(client, big)

    print(f"messages: {len(messages):,} ({chars / len(messages):,.0f} chars on average), batches of {args.batch}")
    print(f"ingest, 1 client:            {single_rate:8,.0f} messages/s")
    print(f"ingest, {args.clients} clients/{args.clients} sessions: {parallel_rate:8,.0f} messages/s")
    print(f"status median at 10 msgs:    {lat_small * 1000:8.2f} ms")
    print(f"status median at {args.messages:,} msgs: {lat_big * 1000:8.2f} ms")
    print(f"status latency ratio {args.messages:,}/10: {lat_big / lat_small:.2f} (target ≤ 1.5)")


if __name__ == "__main__":
    main()
