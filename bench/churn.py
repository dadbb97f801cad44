"""Churn: how often automatic compaction runs, and where it leaves a session, under each preset.

    .venv/bin/python bench/churn.py [--presets default,adk,kai,gsd,brainchain] [--divisor 3] [--window N] [FILES …]

Replays every shared Claude Code transcript (or FILES), one message at a time, through the service
(``recorded.append`` then ``tasks.followup_send``: auto-compaction on, tasks in-process, offline
summarizer) into a session whose window is a third of the transcript's size, so each session has to
be compacted several times. A session continued automatically (``auto_continue``) is followed into
its continuation, as the hook follows it. Per preset it prints the runs, the runs skipped, the
highest and the final usage, and the usage after each run; then checks the targets of issue 13:

- no run skipped for saving too little;
- usage after each run at most the preset's ``target_after``;
- runs ≤ growth ÷ ((compact − target) × window) + 1 per session (growth: what its messages add);
- usage never above 100 % of the window after a run.

Uses a throw-away SQLite database unless DATABASE_URL is set. Figures: docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._replay import SHARED, bench_user, calibrated_size, new_compactions, session_new  # sets Django up

# isort: split
from django.contrib.auth.models import User

from compaction.policy import PRESETS, Policy
from compaction.summarize import split_tail
from compaction.transcripts import read_transcript
from compaction.types import Msg
from sessions_app import tasks
from sessions_app.models import CONTEXT_STATES, AgentSession, Message, SessionStatus
from sessions_app.selectors import usage
from sessions_app.services import recorded

MIN_WINDOW = 2_000  # below this a third of a transcript is too small to say anything


@dataclass
class Replay:
    name: str
    window: int
    growth: int = 0  # calibrated tokens the messages added
    runs: list[tuple[str, str, float]] = field(default_factory=list)  # (level, status, usage % after)
    checkpoints: int = 0  # runs that wrote a checkpoint (a summary)
    floors: list[bool] = field(default_factory=list)  # per run: it left only what no run may touch
    max_percent: float = 0.0
    final_percent: float = 0.0
    continuations: int = 0
    seconds: float = 0.0

    @property
    def skipped(self) -> int:
        """Runs skipped although the context held something worth summarizing."""
        return sum(
            1 for (_, status, _), floor in zip(self.runs, self.floors, strict=True) if status == "skipped" and not floor
        )


def only_untouchable(session: AgentSession, preset_name: str) -> bool:
    """After a run: the context holds nothing worth summarizing — only the newest turn and the
    protected recent messages (with the calls they answer), and older messages whose summary would
    free less than the policy's minimal saving. Such a run ending above the target says the window
    is too small for the policy, not that the run stopped early."""
    factor = usage.model_info(session.model).calibration
    window = session.context_window_override or usage.model_info(session.model).context_window
    policy = PRESETS[preset_name].for_window(window)  # gsd's 90k, as the session's runs saw it
    rows = Message.objects.filter(session=session, state__in=CONTEXT_STATES).order_by("seq")
    messages = [Msg(seq=m.seq, role=m.role, content=m.content, tokens=m.tokens) for m in rows]
    raw_window = int(window / factor)
    summary = replace(policy, summary_budget=int(policy.summary_budget / factor)).summary_tokens(raw_window)
    hard = (1 - policy.output_reserve) * raw_window - summary
    start = split_tail(messages, policy, context_window=raw_window, minimal=True, hard_limit=hard)
    return sum(m.tokens for m in messages[:start]) - summary < policy.min_saving(window) / factor


def run_bound(policy: Policy, replay: Replay) -> float:
    """The most runs a session needs: one per (compact − target) of growth, and one more."""
    return replay.growth / ((policy.compact - policy.target_after) * replay.window) + 1


def replay(path: Path, preset_name: str, user: User, divisor: int, fixed_window: int = 0) -> Replay | None:
    transcript = read_transcript(path.read_bytes(), "claude-code")
    main = next((c for c in transcript.conversations if not c.sidechain), None)
    if main is None:
        return None
    candidates = recorded.candidates(main)
    model = recorded.model_name(main.model) or "claude-sonnet-4-5"
    window = fixed_window or calibrated_size(candidates, model) // divisor
    if window < MIN_WINDOW:
        return None
    project, session = session_new(
        user=user,
        project_name=f"{preset_name} · {path.stem}",
        preset_name=preset_name,
        name=path.stem,
        model=model,
        window=window,
    )
    result = Replay(path.name, window)
    started = time.perf_counter()
    seen: set[int] = set()
    for candidate in candidates:
        before = usage.session_usage(session).used
        stored = recorded.append(session=session, candidates=[candidate], source="bench")
        if not stored.created:
            continue
        session.refresh_from_db()
        result.growth += max(0, usage.session_usage(session).used - before)
        current = usage.session_usage(session)
        result.max_percent = max(result.max_percent, current.usage_percent)
        tasks.followup_send(session.pk)
        for record in new_compactions(project, seen):
            after = (record.tokens_after or 0) / window * 100
            result.runs.append((record.level, record.status, round(after, 1)))
            result.checkpoints += any(item.get("strategy") == "checkpoint" for item in record.items or [])
            result.floors.append(only_untouchable(record.session, preset_name))
        session.refresh_from_db()
        if session.status == SessionStatus.HANDED_OFF:
            following = usage.continuation_of(session)
            if following is None:
                break
            session = AgentSession.objects.get(pk=following)
            result.continuations += 1
            percent = usage.session_usage(session).usage_percent
            result.runs[-1] = (result.runs[-1][0], "continued", percent)
    result.final_percent = usage.session_usage(session).usage_percent
    result.seconds = time.perf_counter() - started
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", default=",".join(PRESETS))
    parser.add_argument("--divisor", type=int, default=3, help="the window is the transcript's size over this")
    parser.add_argument("--window", type=int, default=0, help="one window for every session instead")
    parser.add_argument("files", nargs="*", type=Path)
    args = parser.parse_args()
    user = bench_user("churn")
    files = args.files or sorted((SHARED / "claude_code").glob("*.jsonl"))
    failures = 0
    size = f"{args.window:,} tokens" if args.window else f"transcript size ÷ {args.divisor}"
    print(f"window = {size}; {len(files)} transcripts; usage in % of the window\n")
    for preset_name in args.presets.split(","):
        policy = PRESETS[preset_name]
        replays = [r for r in (replay(p, preset_name, user, args.divisor, args.window) for p in files) if r is not None]
        runs = [run for r in replays for run in r.runs]
        pairs = [
            (percent, floor)
            for r in replays
            for (_, status, percent), floor in zip(r.runs, r.floors, strict=True)
            if status in ("succeeded", "skipped")
        ]
        after = [percent for percent, _ in pairs]
        limit = policy.target_after * 100 + 0.05
        # Above the target only because what no run may touch is itself above it: the window is too small.
        floored = [p for p, untouchable in pairs if p > limit and untouchable]
        bound_broken = [r.name for r in replays if len(r.runs) > run_bound(policy.for_window(r.window), r)]
        over_target = [p for p, untouchable in pairs if p > limit and not untouchable]
        over_window = [p for p in after if p > 100]
        print(
            f"## {preset_name}: compact {policy.compact:.0%}, target {policy.target_after:.0%}, "
            f"{len(replays)} sessions, {sum(r.seconds for r in replays):.0f} s"
        )
        print(
            f"runs {len(runs)} (skipped {sum(r.skipped for r in replays)}, plus "
            f"{sum(1 for _, st, _ in runs if st == 'skipped') - sum(r.skipped for r in replays)} with nothing left to "
            "summarize; "
            f"failed {sum(1 for _, s, _ in runs if s == 'failed')}, "
            f"continued {sum(r.continuations for r in replays)}; "
            f"with a checkpoint {sum(r.checkpoints for r in replays)}); "
            f"max usage {max(r.max_percent for r in replays):.1f}; "
            f"final usage median {statistics.median(r.final_percent for r in replays):.1f}, "
            f"max {max(r.final_percent for r in replays):.1f}"
        )
        if after:
            print(
                f"usage after a run: median {statistics.median(after):.1f}, max {max(after):.1f}; "
                f"above target {len(over_target)} (and {len(floored)} that left only what no run may touch), "
                f"above 100 % {len(over_window)}; "
                f"sessions over the run bound: {len(bound_broken)}"
            )
        continued = [percent for _, status, percent in runs if status == "continued"]
        if continued:
            print(
                f"a continuation starts at: median {statistics.median(continued):.1f}, max {max(continued):.1f} "
                "(the handoff document alone, in the fresh session)"
            )
        if os.environ.get("CHURN_DEBUG"):
            print("  over target (after, floor):", sorted((p, f) for p, f in pairs if p > limit))
        for r in replays:
            trail = " ".join(
                f"{level[0]}{'!' if status == 'skipped' else ''}{percent:g}" for level, status, percent in r.runs
            )
            print(
                f"  {r.name:<48} window {r.window:>7,}  runs {len(r.runs):>2}  max {r.max_percent:5.1f}  "
                f"final {r.final_percent:5.1f}  after: {trail}"
            )
        print()
        failures += bool(over_target or over_window or bound_broken or any(r.skipped for r in replays))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
