"""Transcript sync of one long Claude Code transcript over HTTP, sent as the hook sends it.

    .venv/bin/python bench/transcript_sync.py [--file PATH] [--uploads 60] [--workers 2]

gunicorn (``--workers``, no Redis: each worker's cache is its own) on a fresh Postgres database. The
file (default: the largest shared Claude Code transcript) grows in ``--uploads`` steps ending at line
ends, the last one ``final``; a ``409 transcript_offset`` is answered as the hook answers it, by
sending again from ``expected_offset``. Prints the 409s, the bytes sent, and the time per upload
(median, p90, and the median of the last tenth, which re-read almost the whole file).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._server import Client, gunicorn_on_postgres, make_key
from tests.shared_data import SHARED_DATA


def cuts(data: bytes, uploads: int) -> list[int]:
    ends = [i + 1 for i, b in enumerate(data) if b == 0x0A]
    return sorted({ends[round(k * (len(ends) - 1) / uploads)] for k in range(1, uploads + 1)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    largest = max((SHARED_DATA / "claude_code").glob("*.jsonl"), key=lambda p: p.stat().st_size)
    parser.add_argument("--file", type=Path, default=largest)
    parser.add_argument("--uploads", type=int, default=60)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    data = args.file.read_bytes()
    with gunicorn_on_postgres("ctxweb_bench_transcript_sync", workers=args.workers) as (hostport, env):
        client = Client(hostport, make_key(env))
        _, project = client.call("POST", "/api/v1/projects/", {"name": "bench"})
        times: list[float] = []
        conflicts = sent = 0
        held = 0
        begin = time.perf_counter()
        ends = cuts(data, args.uploads)
        for n, end in enumerate(ends):
            while True:
                body = {
                    "project": str(project["id"]),
                    "external_id": "bench",
                    "offset": held,
                    "lines": data[held:end].decode(),
                    "final": n == len(ends) - 1,
                }
                t0 = time.perf_counter()
                status, answer = client.call("POST", "/api/v1/sessions/transcript/", body)
                times.append(time.perf_counter() - t0)
                sent += end - held
                if status == 409 and answer.get("code") == "transcript_offset":
                    conflicts += 1
                    held = answer["expected_offset"]
                    continue
                assert status == 200, (status, answer)
                held = answer["offset"]
                break
        total = time.perf_counter() - begin
    ms = sorted(t * 1000 for t in times)
    tail = [t * 1000 for t in times[-max(1, len(times) // 10) :]]
    print(f"{args.file.name}: {len(data):,} bytes in {len(ends)} uploads, gunicorn ×{args.workers}, no Redis")
    print(f"requests {len(times)}, 409 transcript_offset {conflicts}, bytes sent {sent:,}")
    print(
        f"per request: median {statistics.median(ms):.0f} ms, p90 {ms[int(len(ms) * 0.9)]:.0f} ms, "
        f"last tenth median {statistics.median(tail):.0f} ms; total {total:.1f} s"
    )


if __name__ == "__main__":
    main()
