"""Counting speed: offline throughput against raw tiktoken, and exact counts served from the cache.

    .venv/bin/python bench/counting.py [--runs 5] [--part offline|cache|both]

Offline. Messages: every message of the shared transcripts (Claude Code, SWE-agent, tau-bench).
"Ours" is what an append does per message: validate and normalise it (``normalize_message``) and
count it (``OfflineTokenizer.count_message``: framing, blocks, tool inputs as JSON). "Raw" is
``tiktoken``'s ``encode_ordinary`` on exactly the text our counter encodes for that message, done
once up front so raw pays for nothing else. Prints tokens/s of each, the ratio (target ≥ 0.8), and
the median per-message latency.

Cache. ``count_request_tokens`` (what ``POST /count_tokens/`` and ``ctx count`` run) with a key set,
against the fake Anthropic server of ``tests/fakes`` on loopback (never the real API), on three
requests built from the shared Claude Code transcripts: one short prompt, the median conversation,
the largest. Per request, medians of ``--runs × 20`` calls of: a miss (the entry deleted first: SDK
client, HTTP call, store), a hit (the whole call: validation, key, lookup), and the cache lookup
alone (key + read + hit counter; seed 000 asks < 5 ms). Also the cost of building an SDK client,
which every hit paid before the client was made lazily. The cache is the configured one: local
memory without ``REDIS_URL``, Redis with it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compaction.messages import normalize_message
from compaction.tokens import OfflineTokenizer, _encoding
from compaction.transcripts import read_transcript

SHARED = Path(os.environ.get("CTX_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")


def messages() -> list[dict[str, Any]]:
    out = []
    for path in sorted((SHARED / "claude_code").glob("*.jsonl")):
        for conv in read_transcript(path.read_bytes(), "claude-code").conversations:
            out += [{"role": m["role"], "content": m["content"]} for m in conv.messages]
    for path in sorted((SHARED / "openai").glob("*")):
        if path.name.startswith("LICENSE"):
            continue
        for conv in read_transcript(path.read_bytes(), "openai").conversations:
            out += [{"role": m["role"], "content": m["content"]} for m in conv.messages]
    return out


def encoded_text(content: Any) -> str:
    """The text our counter encodes for one message's content."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        kind = block.get("type")
        if kind == "text":
            parts.append(block.get("text", ""))
        elif kind == "tool_use":
            arguments = json.dumps(block.get("input", {}), ensure_ascii=False, separators=(",", ":"))
            parts += [block.get("name", ""), arguments]
        elif kind == "tool_result":
            parts.append(encoded_text(block.get("content") or ""))
        elif kind == "thinking":
            parts.append(block.get("thinking", ""))
    return "\n".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--part", choices=["offline", "cache", "both"], default="both")
    args = parser.parse_args()
    if args.part in ("offline", "both"):
        offline(args.runs)
    if args.part in ("cache", "both"):
        cache(args.runs)
    return 0


def offline(runs: int) -> None:
    corpus = messages()
    texts = [encoded_text(m["content"]) for m in corpus]
    tokenizer, encoding = OfflineTokenizer(), _encoding()
    tokenizer.count_text("warm up")
    raw_times, ours_times, per_message = [], [], []
    tokens = 0
    for _ in range(runs):
        t0 = time.perf_counter()
        tokens = sum(len(encoding.encode_ordinary(t)) for t in texts)
        raw_times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for m in corpus:
            s = time.perf_counter()
            normalized = normalize_message(m)
            tokenizer.count_message(normalized.role, normalized.content)
            per_message.append(time.perf_counter() - s)
        ours_times.append(time.perf_counter() - t0)
    raw, ours = statistics.median(raw_times), statistics.median(ours_times)
    print(f"{len(corpus):,} messages, {tokens:,} tokens of text, median of {runs} runs")
    print(f"raw tiktoken encode_ordinary: {tokens / raw:12,.0f} tokens/s  ({raw * 1000:.1f} ms)")
    print(f"ours (normalize + count):     {tokens / ours:12,.0f} tokens/s  ({ours * 1000:.1f} ms)")
    print(f"ratio ours/raw: {raw / ours:.2f} (target >= 0.8)")
    print(
        f"per message: median {statistics.median(per_message) * 1e6:.0f} µs, "
        f"p99 {sorted(per_message)[int(len(per_message) * 0.99)] * 1e6:.0f} µs (target < 50 ms)"
    )


def count_bodies() -> list[tuple[str, dict[str, Any]]]:
    """A short prompt, the median and the largest Claude Code conversation, as count_tokens bodies."""
    conversations = []
    for path in sorted((SHARED / "claude_code").glob("*.jsonl")):
        for conv in read_transcript(path.read_bytes(), "claude-code").conversations:
            conversations.append([{"role": m["role"], "content": m["content"]} for m in conv.messages])
    conversations.sort(key=lambda c: len(json.dumps(c)))
    picked = [
        ("short prompt", [{"role": "user", "content": "Fix the failing test in tests/test_api.py, please."}]),
        ("median conversation", conversations[len(conversations) // 2]),
        ("largest conversation", conversations[-1]),
    ]
    system = "You are Claude Code, Anthropic's official CLI for Claude."
    return [(name, {"model": "claude-sonnet-4-5", "system": system, "messages": m}) for name, m in picked]


def _median_ms(call: Any, times: int, before: Any = None) -> float:
    samples = []
    for _ in range(times):
        if before is not None:
            before()
        t0 = time.perf_counter()
        call()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1000


def cache(runs: int) -> None:
    from tests.fakes.anthropic_server import FakeAnthropic

    with FakeAnthropic() as fake:
        os.environ.update(ANTHROPIC_API_KEY="bench", ANTHROPIC_BASE_URL=fake.base_url, ANTHROPIC_MAX_RETRIES="0")
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")
        import logging

        import anthropic
        import django

        django.setup()
        logging.disable(logging.INFO)  # the SDK logs every request
        from sessions_app.selectors import count_cache
        from sessions_app.services import counting

        calls = runs * 20
        backend = count_cache.exact_count_cache_stats().backend
        print(f"\nexact counts, cache in {backend}, fake Anthropic on loopback, medians of {calls} calls")
        print(f"{'request':<22}{'messages':>9}{'JSON bytes':>12}{'miss':>11}{'hit':>11}{'lookup':>11}")
        for name, body in count_bodies():
            request = {"model": body["model"], "system": body["system"], "tools": None, "messages": body["messages"]}
            key = count_cache.request_key(request)
            result = counting.count_request_tokens(body)  # warm up: imports, the first connection
            assert result.source == "exact", result
            miss = _median_ms(
                lambda b=body: counting.count_request_tokens(b),
                calls,
                before=lambda k=key: count_cache.exact_count_cache().delete(k),
            )
            counting.count_request_tokens(body)
            hit = _median_ms(lambda b=body: counting.count_request_tokens(b), calls)
            assert counting.count_request_tokens(body).cached
            lookup = _median_ms(lambda r=request: counting.exact_cache_get(count_cache.request_key(r)), calls)
            size = len(json.dumps(body).encode())
            print(f"{name:<22}{len(body['messages']):>9,}{size:>12,}{miss:>8.2f} ms{hit:>8.2f} ms{lookup:>8.3f} ms")
        options: dict[str, Any] = {"api_key": "bench", "base_url": fake.base_url, "timeout": 30.0, "max_retries": 0}
        build = _median_ms(lambda: anthropic.Anthropic(**options), calls)
        print(f"building one SDK client (what every hit paid before it was made lazily): {build:.2f} ms")


if __name__ == "__main__":
    raise SystemExit(main())
