"""What redaction costs on the way in: append latency and ingest throughput with it on, against the
same server and run with every kind of secret switched off, against gunicorn + Postgres.

    .venv/bin/python bench/redaction.py [--messages 8000] [--appends 400] [--rounds 8] [--real-rounds 4]

Two projects, one with the default rules, one with every kind switched off (``redact_off``). Round
by round, alternating which goes first so both see the same machine: single appends (p50 and p99),
batches of 100 of ``bench/ingest.py``'s agent-like messages (one in fifty holding a secret line: an
AWS key, a GitHub token, a password assignment), and (``--real-rounds``) the shared real
transcripts' messages in batches of 100, a session each. Prints the medians side by side, and the
median and range of each round's on ÷ off (one round is a pair run back to back: the machine's
drift between rounds cancels out). Also the engine alone in-process over the shared real
transcripts (MB/s) and over hostile shapes (linear time).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._server import Client, gunicorn_on_postgres, make_key
from bench.ingest import new_session, realistic_messages
from compaction import redact

SHARED = Path(os.environ.get("CTX_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
SECRET_LINES = (
    "export AWS_ACCESS_KEY_ID=AKIA{}",
    "GITHUB_TOKEN=ghp_{}{}",
    'db_password = "{}"',
)


def with_secrets(messages: list[dict], rng: random.Random) -> list[dict]:
    for n, message in enumerate(messages):
        if n % 50 == 7 and isinstance(message["content"], str):
            value = "".join(rng.choices("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", k=16))
            line = rng.choice(SECRET_LINES).format(value, value[:20], value)
            message["content"] += "\n" + line
    return messages


def appends(client: Client, session: int, n: int, tag: str) -> list[float]:
    times = []
    for i in range(n):
        body = {
            "role": "user",
            "content": f"step {i}: export TOKEN=ghp_{i:04d}aBcDeFgHiJkLmNoPqRsTuVwXyZ0123",
            "client_id": f"{tag}-{i}",
        }
        t0 = time.perf_counter()
        status, _ = client.call("POST", f"/api/v1/sessions/{session}/messages/", body)
        times.append((time.perf_counter() - t0) * 1000)
        assert status == 201
    return times


def batches(client: Client, session: int, messages: list[dict]) -> float:
    t0 = time.perf_counter()
    for k in range(0, len(messages), 100):
        status, body = client.call("POST", f"/api/v1/sessions/{session}/messages/", messages[k : k + 100])
        assert status == 201, (status, body)
    return len(messages) / (time.perf_counter() - t0)


def engine_rate() -> tuple[float, int]:
    """MB/s (of the messages' JSON) of the engine alone over the shared transcripts' messages, each
    redacted as the service does it (``redact`` of its content)."""
    from compaction.transcripts.formats import read_transcript

    contents: list[object] = []
    for path in sorted(SHARED.rglob("*")):
        if path.suffix in (".jsonl", ".json", ".traj"):
            fmt = "claude-code" if "claude_code" in path.parts else "openai"
            for conversation in read_transcript(path.read_bytes(), fmt).conversations:
                contents.extend(m["content"] for m in conversation.messages)
    rules = redact.Rules(key=b"bench")
    t0 = time.perf_counter()
    for content in contents:
        redact.redact(content, rules)
    size = sum(len(json.dumps(c)) for c in contents)
    return size / 1e6 / (time.perf_counter() - t0), len(contents)


_SHARED = "Qz7" + "".join(random.Random(64).choices("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghjkmnpqrstuvwxyz23456789", k=61))


def engine_per_message() -> float:
    """µs to redact one of 2,000 of the bench's messages (their content, as the service does), best of 7."""
    messages = with_secrets(realistic_messages(2_000, random.Random(1)), random.Random(2))
    rules, best = redact.Rules(key=b"bench"), float("inf")
    for _ in range(7):
        t0 = time.perf_counter()
        for message in messages:
            redact.redact(message["content"], rules)
        best = min(best, time.perf_counter() - t0)
    return best / len(messages) * 1e6


# Text shaped to make a regular expression try again from every position of a long run (what a
# hostile sender would try): each must take time in proportion to its length.
HOSTILE = {
    '"sk-" × n': lambda n: "sk-" * n,
    '"eyJ" × n': lambda n: "eyJ" * n,
    '"//a/:_authToken=!" × n': lambda n: "//a/:_authToken=!" * n,
    '"-----BEGIN RSA PRIVATE KEY-----" × n': lambda n: "-----BEGIN RSA PRIVATE KEY-----" * n,
    "'password = \"' × n": lambda n: 'password = "' * n,
    '"://a" × n': lambda n: "://a" * n,
    # Names of secrets assigned to runs of names and values, flags, tags, glued keys and tokens.
    '"key:key:…" × n': lambda n: "key:" * n,
    '"password=a" × n': lambda n: "password=a" * n,
    '"--password " × n': lambda n: "--password " * n,
    '"<token>" × n': lambda n: "<token>" * n,
    '"1sk-" × n': lambda n: "1sk-" * n,
    '"eyJhbGciOiJIUzI1NiJ9." × n': lambda n: "eyJhbGciOiJIUzI1NiJ9." * n,
    '"eyJ" × n + ".x"': lambda n: "eyJ" * n + ".xx",
    '"-----BEGIN RSA PRIVATE KEY-----\\n\\0\\n" × n': lambda n: "-----BEGIN RSA PRIVATE KEY-----\n\x00\n" * n,
    # Many values found that share their first 64 characters (each found where it starts, not tried
    # against every other value of its group).
    'password_i = "<64 shared><4 random>" lines': lambda n: "".join(
        f'password_{i} = "{_SHARED}{random.Random(i).randbytes(2).hex()}"\n' for i in range(n)
    ),
    # Many different secrets: each string is read once, however many values were found.
    'password = "<10 random>" lines': lambda n: "".join(
        f'password = "{random.Random(i).randbytes(5).hex()}"\n' for i in range(n)
    ),
}


def hostile_times() -> list[tuple[str, float, float]]:
    """ms to redact 100 kB and 400 kB of each shape (linear: about 4× apart)."""
    rules = redact.Rules(key=b"bench")
    rows = []
    for label, make in HOSTILE.items():
        times = []
        for size in (100_000, 400_000):
            text = make(size // len(make(1)))
            t0 = time.perf_counter()
            redact.redact(text, rules)
            times.append((time.perf_counter() - t0) * 1000)
        rows.append((label, times[0], times[1]))
    return rows


def real_messages() -> list[list[dict]]:
    """The shared real transcripts' conversations, as the REST API takes their messages."""
    from compaction.transcripts.formats import read_transcript

    conversations = []
    for path in sorted(SHARED.rglob("*")):
        if path.suffix in (".jsonl", ".json", ".traj"):
            fmt = "claude-code" if "claude_code" in path.parts else "openai"
            for conversation in read_transcript(path.read_bytes(), fmt).conversations:
                messages = [{"role": m["role"], "content": m["content"]} for m in conversation.messages]
                conversations.append(messages)
    return conversations


def real_ingest(client: Client, project: int, conversations: list[list[dict]], tag: str) -> float:
    """Messages a second: each conversation into a session of its own, in batches of 100."""
    total, t0 = 0, time.perf_counter()
    for n, messages in enumerate(conversations):
        session = new_session(client, project, f"{tag} {n}")
        total += len(messages)
        for k in range(0, len(messages), 100):
            status, body = client.call("POST", f"/api/v1/sessions/{session}/messages/", messages[k : k + 100])
            assert status == 201, (status, str(body)[:300])
    return total / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=8_000)
    parser.add_argument("--appends", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--real-rounds", type=int, default=4)
    args = parser.parse_args()
    rng = random.Random(11)
    results: dict[str, dict[str, list[float]]] = {"on": {}, "off": {}}
    conversations = real_messages() if args.real_rounds else []
    with gunicorn_on_postgres("ctxweb_bench_redaction", workers=2) as (hostport, env):
        client = Client(hostport, make_key(env))
        projects = {}
        for mode in ("on", "off"):
            status, project = client.call("POST", "/api/v1/projects/", {"name": f"redaction {mode}"})
            assert status == 201, project
            projects[mode] = project["id"]
        off = [*redact.kinds(), redact.CUSTOM]
        status, body = client.call("PATCH", f"/api/v1/projects/{projects['off']}/policy/", {"redact_off": off})
        assert status == 200, body
        warm = new_session(client, projects["on"], "warm")  # imports, caches, prepared plans
        batches(client, warm, realistic_messages(300, random.Random(99)))
        for r in range(max(args.rounds, args.real_rounds)):
            msgs = with_secrets(realistic_messages(args.messages // args.rounds, random.Random(r)), rng)
            for mode in ("on", "off") if r % 2 == 0 else ("off", "on"):
                got, project = results[mode], projects[mode]
                if r < args.rounds:
                    session = new_session(client, project, f"{mode} {r}")
                    times = appends(client, session, args.appends // args.rounds, f"{mode}{r}")
                    got.setdefault("append", []).extend(times)
                    bulk = new_session(client, project, f"{mode} bulk {r}")
                    tagged = [{**m, "client_id": f"{mode}{r}-{m['client_id']}"} for m in msgs]
                    got.setdefault("ingest", []).append(batches(client, bulk, tagged))
                if r < args.real_rounds:
                    rate = real_ingest(client, project, conversations, f"{mode} real {r}")
                    got.setdefault("real", []).append(rate)
    rate, texts = engine_rate()
    print(f"{'':40}{'on':>10}{'off':>10}{'on ÷ off':>10}   each round's on ÷ off: median (range)")
    rows: list[tuple[str, str, Callable[[list[float]], float]]] = [
        ("append p50 (ms)", "append", statistics.median),
        ("append p99 (ms)", "append", lambda v: sorted(v)[int(len(v) * 0.99) - 1]),
        ("ingest, batches of 100 (messages/s)", "ingest", statistics.median),
        ("real transcripts, batches of 100 (msg/s)", "real", statistics.median),
    ]
    for label, key, pick in rows:
        if key not in results["on"]:
            continue
        on, off_ = pick(results["on"][key]), pick(results["off"][key])
        paired = ""
        if key in ("ingest", "real"):
            ratios = [a / b for a, b in zip(results["on"][key], results["off"][key], strict=True)]
            paired = f"   {statistics.median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f}, {len(ratios)} rounds)"
        print(f"{label:40}{on:>10.1f}{off_:>10.1f}{on / off_:>10.2f}{paired}")
    print(f"engine alone: {rate:.1f} MB/s over {texts:,} messages of the shared transcripts")
    print(f"engine alone: {engine_per_message():.1f} µs a message over 2,000 of the bench's messages")
    for label, small, large in hostile_times():
        print(f"hostile {label:40} 100 kB {small:7.1f} ms   400 kB {large:7.1f} ms")


if __name__ == "__main__":
    main()
