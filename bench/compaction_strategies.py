"""Compaction speed and savings, offline, on the shared transcripts and a synthetic 100,000-token session.

    .venv/bin/python bench/compaction_strategies.py [--runs 5] [FILES …]

For each session (filled to 90 % of a window sized for it): the median time to plan the reversible
compaction and the extractive summary (targets < 1 s and < 3 s at 100k tokens, docs/BENCHMARKS.md); the tokens
each strategy saves; and, side by side, what Anthropic's `clear_tool_uses` (keep the 3 newest tool
uses) and OpenCode's prune rule (protect the newest 40k tokens of tool output) save — each with its
identifier retention: the share of the original's file paths, error lines and decision lines still
present verbatim in the context (+ the checkpoint, for a summary). A session the engine refuses to
summarize (too small: ``nothing_to_summarize``, ``summary_too_large``) shows "—" and is named below
the table. The baselines and the retention measure are in ``bench/baselines.py``.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.baselines import anthropic_clear_tool_uses, identifiers, message_text, opencode_prune, retention
from compaction.checkpoint import render_summary_text
from compaction.errors import EngineError
from compaction.policy import Policy
from compaction.reversible import plan_compact
from compaction.summarize import ExtractiveSummarizer, SummaryPlan, plan_summarize
from compaction.tokens import OfflineTokenizer
from compaction.transcripts import read_transcript
from compaction.types import Msg

SHARED = Path(os.environ.get("CTX_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
TOKENIZER = OfflineTokenizer()
NOW = "2026-11-22T00:00:00Z"
WORDS = ("build", "test", "config", "request", "handler", "module", "parser", "value", "token", "queue", "cache")


def as_msgs(messages: list[dict[str, Any]]) -> list[Msg]:
    return [
        Msg(seq=i, role=m["role"], content=m["content"], tokens=TOKENIZER.count_message(m["role"], m["content"]))
        for i, m in enumerate(messages, start=1)
    ]


def count(messages: list[dict[str, Any]]) -> int:
    return sum(TOKENIZER.count_message(m["role"], m["content"]) for m in messages)


def synthetic(target_tokens: int = 100_000, seed: int = 3) -> list[dict[str, Any]]:
    """An agent session of ~target tokens: prompts, tool calls, long logs with errors, decisions, repeats."""
    rng = random.Random(seed)
    words = WORDS
    out: list[dict[str, Any]] = []
    total, i, last_log = 0, 0, ""
    while total < target_tokens:
        start = len(out)
        if i % 5 == 0:
            out.append({"role": "user", "content": f"Please fix src/pkg/mod_{i}.py; the test fails."})
        tool_id = f"toolu_{i}"
        command = {"command": f"pytest tests/test_{i}.py -x"}
        out.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Checking step {i}."},
                    {"type": "tool_use", "id": tool_id, "name": "Bash", "input": command},
                ],
            }
        )
        lines = [f"[{k:04d}] " + " ".join(rng.choice(words) for _ in range(9)) for k in range(rng.randint(40, 160))]
        if i % 3 == 0:
            lines.insert(len(lines) // 2, f"ERROR tests/test_{i}.py::test_case failed: AssertionError: {i}")
        if i % 7 == 0:
            lines.append(f"## Decision: keep the retry loop in src/pkg/mod_{i}.py")
        log = last_log if i % 11 == 10 else "\n".join(lines)  # now and then the same output again
        last_log = log
        out.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": log}]})
        out.append({"role": "assistant", "content": f"Step {i} done: src/pkg/mod_{i}.py updated."})
        total += count(out[start:])
        i += 1
    out.append({"role": "user", "content": "Summarize what changed and what is left."})
    return out


def sessions(paths: list[Path]) -> list[tuple[str, list[dict[str, Any]]]]:
    found = []
    for path in paths:
        fmt = "claude-code" if path.suffix == ".jsonl" else "openai"
        transcript = read_transcript(path.read_bytes(), fmt)
        mains = [c for c in transcript.conversations if not c.sidechain and c.messages]
        if fmt == "openai" and len(mains) > 1:  # tau-bench: the episodes together, one row
            found.append((f"{path.name} ({len(mains)} episodes)", [m for c in mains for m in c.messages]))
        elif mains:
            found.append((path.name, list(mains[0].messages)))
    return found


def apply_changes(messages: list[dict[str, Any]], changes: list[Any]) -> list[dict[str, Any]]:
    new = {c.seq: c.content for c in changes}
    return [{**m, "content": new.get(i, m["content"])} for i, m in enumerate(messages, start=1)]


def timed(fn: Any, runs: int) -> tuple[Any, float]:
    times, result = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return result, statistics.median(times)


def measure(name: str, messages: list[dict[str, Any]], runs: int) -> dict[str, Any]:
    msgs = as_msgs(messages)
    total = sum(m.tokens for m in msgs)
    window = math.ceil(total / 0.9)
    policy = Policy()
    changes, t_compact = timed(lambda: plan_compact(msgs, policy, context_window=window, tokenizer=TOKENIZER), runs)
    by_strategy: dict[str, int] = defaultdict(int)
    for c in changes:
        by_strategy[c.strategy] += c.tokens_before - c.tokens_after
    compacted = apply_changes(messages, changes)
    summarizer = ExtractiveSummarizer(TOKENIZER, policy.preserve_patterns)

    def summarize() -> SummaryPlan | EngineError:
        try:
            return plan_summarize(
                msgs, policy, context_window=window, tokenizer=TOKENIZER, summarizer=summarizer, now=NOW
            )
        except EngineError as exc:  # a session too small to summarize: reported, not a crash
            return exc

    summary, t_summary = timed(summarize, runs)
    if isinstance(summary, EngineError):
        summary_usage, summary_retention, summary_refused = None, None, summary.code
    else:
        gone = set(summary.summarized_seqs)
        kept = [m for i, m in enumerate(messages, start=1) if i not in gone]
        summary_usage = (summary.kept_tokens + summary.summary_tokens) / window
        summary_retention = retention(messages, kept, [render_summary_text(summary.checkpoint)])
        summary_refused = None
    anthropic = anthropic_clear_tool_uses(messages, keep=3)
    opencode = opencode_prune(messages)
    return {
        "name": name,
        "tokens": total,
        "t_compact": t_compact,
        "t_summary": t_summary,
        "saved": {k: v / total for k, v in sorted(by_strategy.items())},
        "compact_saved": sum(by_strategy.values()) / total,
        "summary_usage": summary_usage,
        "summary_refused": summary_refused,
        "anthropic_saved": 1 - count(anthropic) / total,
        "opencode_saved": 1 - count(opencode) / total,
        "identifiers": {kind: len(found) for kind, found in identifiers(message_text(m) for m in messages).items()},
        "retention": {
            "compact": retention(messages, compacted),
            "summarize": summary_retention,
            "anthropic": retention(messages, anthropic),
            "opencode": retention(messages, opencode),
        },
    }


def pct(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:5.1f}%"


def mean_retention(r: dict[str, float] | None) -> str:
    return "—" if r is None else pct(sum(r.values()) / len(r))


def pooled_retention(rows: list[dict[str, Any]], method: str, kind: str) -> str:
    """Identifiers of one kind kept by one method, over all the rows' identifiers of that kind."""
    counted = [r for r in rows if r["retention"][method] is not None and r["identifiers"][kind]]
    total = sum(r["identifiers"][kind] for r in counted)
    if not total:
        return "—"
    kept = sum(r["retention"][method][kind] * r["identifiers"][kind] for r in counted)
    return f"{pct(kept / total)} of {total:,}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    paths = args.files or sorted((SHARED / "claude_code").glob("*.jsonl")) + sorted(
        p for p in (SHARED / "openai").glob("*") if not p.name.startswith("LICENSE")
    )
    rows = [measure("synthetic 100k", synthetic(), args.runs)]
    rows += [measure(name, messages, args.runs) for name, messages in sessions(paths)]
    print(
        "Each session fills 90 % of its window. compact / anthr. / openc. = share of message tokens saved; "
        "summ.use = window used after summarizing (— = refused);\n"
        "ret = file paths / error lines / decision lines kept verbatim, mean of the three shares "
        "(ret sum counts the checkpoint text)."
    )
    print(
        f"{'session':44} {'tokens':>8} {'compact':>8} {'t(ms)':>7} {'summ.use':>8} {'t(ms)':>7} "
        f"{'anthr.':>7} {'openc.':>7} | {'ret ours':>8} {'ret sum':>8} {'ret anth':>8} {'ret openc':>9}"
    )
    for r in rows:
        ret = r["retention"]
        print(
            f"{r['name'][:44]:44} {r['tokens']:8,} {pct(r['compact_saved']):>8} {r['t_compact'] * 1000:7.1f} "
            f"{pct(r['summary_usage']):>8} {r['t_summary'] * 1000:7.1f} {pct(r['anthropic_saved']):>7} "
            f"{pct(r['opencode_saved']):>7} | {mean_retention(ret['compact']):>8} "
            f"{mean_retention(ret['summarize']):>8} "
            f"{mean_retention(ret['anthropic']):>8} {mean_retention(ret['opencode']):>9}"
        )
    print("\nTokens saved per strategy (share of message tokens; a message counts for the strategy saving most in it):")
    for r in rows:
        saved = ", ".join(f"{k} {pct(v)}" for k, v in r["saved"].items()) or "nothing"
        print(f"  {r['name'][:44]:44} {saved}")
    refused = [r for r in rows if r["summary_refused"]]
    if refused:
        print("\nSummarize refused: " + ", ".join(f"{r['name']} ({r['summary_refused']})" for r in refused))
    real = rows[1:]
    if real:
        usage = [r["summary_usage"] for r in real if r["summary_usage"] is not None]
        print(
            f"\nMedian over {len(real)} real sessions: "
            f"compact saves {pct(statistics.median(r['compact_saved'] for r in real))}, "
            f"Anthropic clear_tool_uses {pct(statistics.median(r['anthropic_saved'] for r in real))}, "
            f"OpenCode prune {pct(statistics.median(r['opencode_saved'] for r in real))}"
            + (
                f"; usage after summarize {pct(statistics.median(usage))} (max {pct(max(usage))}, "
                f"{len(usage)} sessions)"
                if usage
                else ""
            )
        )
        tokens = sum(r["tokens"] for r in real)
        print(
            f"All {len(real)} real sessions together ({tokens:,} tokens): "
            f"compact saves {pct(sum(r['compact_saved'] * r['tokens'] for r in real) / tokens)}, "
            f"Anthropic clear_tool_uses {pct(sum(r['anthropic_saved'] * r['tokens'] for r in real) / tokens)}, "
            f"OpenCode prune {pct(sum(r['opencode_saved'] * r['tokens'] for r in real) / tokens)}"
        )
        print(f"\nIdentifier retention over the {len(real)} real sessions, pooled (kept of all identifiers of a kind):")
        print(f"  {'':10} {'paths':>18} {'error lines':>18} {'decision lines':>18}")
        for method, label in (
            ("compact", "compact"),
            ("summarize", "summarize"),
            ("anthropic", "Anthropic"),
            ("opencode", "OpenCode"),
        ):
            print(
                f"  {label:10} "
                + " ".join(f"{pooled_retention(real, method, kind):>18}" for kind in ("paths", "errors", "decisions"))
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
