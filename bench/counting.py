"""Offline counting throughput: our pipeline against raw tiktoken on the same text.

    .venv/bin/python bench/counting.py [--runs 5]

Messages: every message of the shared transcripts (Claude Code, SWE-agent, tau-bench). "Ours" is
what an append does per message: validate and normalise it (``normalize_message``) and count it
(``OfflineTokenizer.count_message``: framing, blocks, tool inputs as JSON). "Raw" is
``tiktoken``'s ``encode_ordinary`` on exactly the text our counter encodes for that message, done
once up front so raw pays for nothing else. Prints tokens/s of each, the ratio (target ≥ 0.8), and
the median per-message latency.
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
    args = parser.parse_args()
    corpus = messages()
    texts = [encoded_text(m["content"]) for m in corpus]
    tokenizer, encoding = OfflineTokenizer(), _encoding()
    tokenizer.count_text("warm up")
    raw_times, ours_times, per_message = [], [], []
    tokens = 0
    for _ in range(args.runs):
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
    print(f"{len(corpus):,} messages, {tokens:,} tokens of text, median of {args.runs} runs")
    print(f"raw tiktoken encode_ordinary: {tokens / raw:12,.0f} tokens/s  ({raw * 1000:.1f} ms)")
    print(f"ours (normalize + count):     {tokens / ours:12,.0f} tokens/s  ({ours * 1000:.1f} ms)")
    print(f"ratio ours/raw: {raw / ours:.2f} (target >= 0.8)")
    print(
        f"per message: median {statistics.median(per_message) * 1e6:.0f} µs, "
        f"p99 {sorted(per_message)[int(len(per_message) * 0.99)] * 1e6:.0f} µs (target < 50 ms)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
