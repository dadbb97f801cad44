"""What the session chart costs, against gunicorn + Postgres.

    .venv/bin/python bench/history.py [--sizes 10,1000,10000] [--repeat 30]

For sessions of each size (realistic message lengths, as bench/ingest.py makes them): the median
latency of ``GET /sessions/{id}/status/`` (the baseline: running totals, flat in the size) next to
``GET /sessions/{id}/history/`` (every message's stored count, read and summed; nothing re-tokenized),
and their ratio. The session page draws the chart from the same selector. Last,
``GET /sessions/{id}/tools/`` (tokens by tool: every message's content read, the small blocks
tokenized).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._server import Client, gunicorn_on_postgres, make_key
from bench.ingest import ingest, new_session, realistic_messages


def median_ms(client: Client, path: str, repeat: int) -> tuple[float, int]:
    times, size = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        status, body = client.call("GET", path)
        times.append(time.perf_counter() - t0)
        assert status == 200, (status, body)
        size = len(body.get("points", [])) if isinstance(body, dict) else 0
    return statistics.median(times) * 1000, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10,1000,10000")
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    rng = random.Random(7)
    with gunicorn_on_postgres("ctxweb_bench_history", workers=2) as (hostport, env):
        client = Client(hostport, make_key(env))
        _, project = client.call("POST", "/api/v1/projects/", {"name": "bench"})
        print(f"{'messages':>9} {'status ms':>10} {'history ms':>11} {'ratio':>6} {'tools ms':>9}")
        for size in (int(s) for s in args.sizes.split(",")):
            session = new_session(client, project["id"], f"s{size}")
            ingest(client, session, realistic_messages(size, rng), 500)
            status_ms, _ = median_ms(client, f"/api/v1/sessions/{session}/status/", args.repeat)
            history_ms, points = median_ms(client, f"/api/v1/sessions/{session}/history/", args.repeat)
            assert points == size
            tools_ms, _ = median_ms(client, f"/api/v1/sessions/{session}/tools/", args.repeat)
            print(f"{size:>9,} {status_ms:>10.2f} {history_ms:>11.2f} {history_ms / status_ms:>6.1f} {tools_ms:>9.2f}")


if __name__ == "__main__":
    main()
