"""Single-client batch ingest over HTTP against the one-process limit, in one run.

    .venv/bin/python bench/ingest_limit.py [--messages 5000] [--batch 100] [--rounds 3]

On a fresh Postgres database served by gunicorn (4 workers), the same agent-like messages (as
``bench/ingest.py`` makes them) are stored three ways, each into a session of its own, alternating
for ``--rounds`` rounds:

- **HTTP**: one client posting batches of ``--batch`` to ``POST /api/v1/sessions/{id}/messages/``;
- **service**: this process calling what that endpoint calls (``normalize_batch``, then
  ``ingest.message_append``: count, lock, check, insert, totals), no HTTP;
- **floor**: counting and a bare ``bulk_create`` of the rows, nothing else (what no append can beat).

Prints messages/s of each (medians over the rounds) and HTTP ÷ service (the issue's target: ≥ 0.5).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._server import Client, gunicorn_on_postgres, make_key
from bench.ingest import new_session, realistic_messages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=5_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rates: dict[str, list[float]] = {"HTTP, one client": [], "service, in-process": [], "floor: count + insert": []}
    with gunicorn_on_postgres("ctxweb_bench_ingest_limit", workers=4) as (hostport, env):
        os.environ.update({k: env[k] for k in ("DATABASE_URL", "SECRET_KEY", "DEBUG")})
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")
        import django

        django.setup()
        from compaction.messages import normalize_batch
        from sessions_app.engine import offline_tokenizer
        from sessions_app.models import AgentSession, Message
        from sessions_app.services import ingest

        client = Client(hostport, make_key(env))
        _, project = client.call("POST", "/api/v1/projects/", {"name": "bench"})
        for round_ in range(args.rounds):
            messages = realistic_messages(args.messages, random.Random(round_))
            batches = [messages[k : k + args.batch] for k in range(0, len(messages), args.batch)]

            session = new_session(client, project["id"], f"http {round_}")
            t0 = time.perf_counter()
            for batch in batches:
                status, body = client.call("POST", f"/api/v1/sessions/{session}/messages/", batch)
                assert status == 201, (status, body)
            rates["HTTP, one client"].append(len(messages) / (time.perf_counter() - t0))

            target = AgentSession.objects.get(pk=new_session(client, project["id"], f"service {round_}"))
            t0 = time.perf_counter()
            for batch in batches:
                ingest.message_append(session=target, messages=normalize_batch(batch, max_messages=len(batch)))
            rates["service, in-process"].append(len(messages) / (time.perf_counter() - t0))

            bare = AgentSession.objects.get(pk=new_session(client, project["id"], f"floor {round_}"))
            tokenizer = offline_tokenizer()
            t0 = time.perf_counter()
            seq = 0
            for batch in batches:
                normalized = normalize_batch(batch, max_messages=len(batch))
                rows = []
                for m in normalized:
                    seq += 1
                    tokens = tokenizer.count_message(m.role, m.content)
                    rows.append(Message(session=bare, seq=seq, role=m.role, content=m.content, tokens=tokens,
                                        client_id=m.client_id, created_at=bare.created_at))  # fmt: skip
                Message.objects.bulk_create(rows)
            rates["floor: count + insert"].append(len(messages) / (time.perf_counter() - t0))
    print(f"{args.messages:,} messages in batches of {args.batch}, medians of {args.rounds} rounds")
    medians = {name: statistics.median(values) for name, values in rates.items()}
    for name, rate in medians.items():
        print(f"{name:24} {rate:8,.0f} messages/s   ({', '.join(f'{r:,.0f}' for r in rates[name])})")
    print(f"HTTP ÷ service: {medians['HTTP, one client'] / medians['service, in-process']:.2f} (target ≥ 0.5)")
    print(f"HTTP ÷ floor:   {medians['HTTP, one client'] / medians['floor: count + insert']:.2f}")


if __name__ == "__main__":
    main()
