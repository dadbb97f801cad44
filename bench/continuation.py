"""Continuation probes (issue 14): after every compaction, can the agent carry on from its context?

    .venv/bin/python bench/continuation.py [--summarizer offline|fake|both] [--window search|third] [--files F …]
                                           [--json OUT] [--check]

Replays every shared transcript — the main conversation of each Claude Code file, the SWE-agent
trajectory, and each tau-bench episode as a session of its own — one message at a time through the
service (``recorded.append`` then ``tasks.followup_send``: auto-compaction on, the ``default`` policy,
tasks in-process, a throw-away SQLite database; ``bench/_replay.py``), with no system prompt and no
tool definitions, as ``bench/churn.py`` does. Just before an append sets a run off (the session at
its compact level or above) it reads the context the agent would receive (``GET …/context``, both
formats); after every run that succeeded it reads it again and asks the eight probes of
``bench/probes.py`` of it, against the messages the bench itself sent up to that point.

Side by side, at the same points and on the same history, three published rules
(``bench/baselines.py``): Anthropic's ``clear_tool_uses`` (no summary), OpenCode's prune + summary
placement, and Claude Code's (the summary alone). Their summary is the narrative part of the
checkpoint the run made — its fields without ``facts`` — rendered as ctxweb renders it (at a run
that made none, the session's current checkpoint); their usage is their messages' calibrated
offline count.

Window rule: at a compaction point the window must leave room under the policy's target for what no
run may touch, or probes 5 and 7 fail by construction. What must stay after message i is its *newest
turn*: the three newest turns (those probe 5 asks for; a turn is a run of messages of one side, as
the Anthropic format merges them), the calls their results answer (and the messages between) and the
last user message — and the facts a checkpoint made there would carry (``compaction/facts.py``: the
user's words, the todo list, files, open errors, counted whole); it has room in window W when
``target_after × W ≥ turn + facts + summary budget(W) + request framing``, counted as the service
plans a run. The first replay uses a third of the
session's calibrated size (as churn). A replay with a compaction point lacking room is followed by
one at the smallest window with room at those points; one with room everywhere but fewer than two
summaries (runs that wrote a checkpoint) by a smaller one: 60 % of its window, or halfway down to
the largest window known to lack room. At most five replays; of those with room at every point the
one with the most summaries (up to two), then the smallest window, is reported — if none had room,
one at the *floor*, the window with room after every message of the session. A session with fewer
than two summaries even so is listed as such; its compactions are probed all the same.

``--window third`` replays each session once, at a third of its calibrated size, with no search
(issue 30's measure): what a window too small for the newest turns does to the probes shows as it is.

``--summarizer fake`` starts the fake Anthropic server of ``tests/fakes/anthropic_server.py``
in-process and points the settings at it (``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``): every
summary then comes from its scripted reply — a valid checkpoint that leaves every fact out (a
paraphrased objective, one line of narrative, empty lists) — so the facts the probes find must have
come another way. Its count endpoint refuses (400), so exact counts fail and the service keeps its
offline estimate, as in the offline mode. The real API is never called. ``both`` runs the two modes
one after the other, the fake one at the window the offline one chose (where it has room in the fake
one too, else at the window its own search picks); the baselines are then those of the offline run.

Prints a row per session (window, summaries, runs, ctxweb's probe shares) and one table: a row per
method, a column per probe pooled over all compaction points and both formats (n/a points left
out), with the targets. Exit 0 (a bench reports), unless ``--check``: 1 when ctxweb misses a target.
Figures: docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._replay import SHARED, TOKENIZER, bench_user, calibrated_size, new_compactions, session_new  # sets Django up

# isort: split
from django.contrib.auth.models import User
from django.test.utils import override_settings

from bench import probes
from bench.baselines import anthropic_clear_tool_uses, claude_code_compact, opencode_compact
from bench.probes import FACTLESS_CHECKPOINT as FAKE_CHECKPOINT
from bench.probes import Message, Score
from compaction import context as engine_context
from compaction.checkpoint import render_summary_text
from compaction.facts import facts_update, render_facts
from compaction.messages import tool_result_ids, tool_use_ids
from compaction.policy import PRESETS, Policy
from compaction.tokens import DEFAULT_FRAMING, calibrate
from compaction.transcripts import read_transcript
from compaction.types import Level, Msg
from sessions_app import tasks
from sessions_app.models import STEP_UP_NOTE, AgentSession, Checkpoint, CompactionStatus, SessionStatus
from sessions_app.selectors import model_context, usage
from sessions_app.services import recorded
from tests.fakes.anthropic_server import FakeAnthropic

PRESET = "default"
FORMATS = ("anthropic", "openai")
BASELINES = ("clear_tool_uses", "opencode", "claude_code")
LABELS = {
    "offline": "ctxweb, offline summarizer",
    "fake": "ctxweb, fake LLM (facts left out)",
    "clear_tool_uses": "Anthropic clear_tool_uses",
    "opencode": "OpenCode prune + summary",
    "claude_code": "Claude Code (summary only)",
}
MAX_REPLAYS = 5
SHRINK = 0.6
WANTED_SUMMARIES = 2


# ----------------------------------------------------------------------------- sessions


@dataclass
class Source:
    name: str
    model: str
    candidates: list[recorded.Candidate]


def sources(paths: Sequence[Path]) -> list[Source]:
    """One replayable session per Claude Code file (its main conversation) and per OpenAI
    conversation (tau-bench: each episode)."""
    found = []
    for path in paths:
        fmt = "claude-code" if path.suffix == ".jsonl" else "openai"
        transcript = read_transcript(path.read_bytes(), fmt)
        mains = [c for c in transcript.conversations if not c.sidechain and c.messages]
        if fmt == "claude-code":
            mains = mains[:1]
        for conversation in mains:
            episode = conversation.key.removeprefix("episode-")
            name = path.stem if len(mains) == 1 else f"{path.stem.split('_')[0]} #{episode}"
            default = "claude-sonnet-4-5" if fmt == "claude-code" else "gpt-4o"
            model = recorded.model_name(conversation.model) or default
            found.append(Source(name, model, recorded.candidates(conversation)))
    return found


def turn_sizes(messages: Sequence[Message], tokens: Sequence[int], newest: int = 3) -> list[int]:
    """Per message, what must stay verbatim were the session compacted right after it, in tokens: the
    ``newest`` turns (probe 5's three; a turn is a run of messages of one side, as the Anthropic
    format merges them, so they cover the newest three of either format), the calls their results
    answer (and what lies between) and the last user message."""
    prefix = [0]
    for n in tokens:
        prefix.append(prefix[-1] + n)
    call_at: dict[str, int] = {}
    turn_starts: list[int] = []
    last_user = -1
    sizes = []
    for i, message in enumerate(messages):
        content = message["content"]
        call_at.update(dict.fromkeys(tool_use_ids(content), i))
        if i == 0 or (message["role"] == "assistant") != (messages[i - 1]["role"] == "assistant"):
            turn_starts.append(i)
        if message["role"] in ("user", "tool"):
            last_user = i
        start, moved = turn_starts[-newest] if len(turn_starts) >= newest else 0, True
        while moved:
            moved = False
            earliest = min(
                (call_at.get(r, start) for m in messages[start : i + 1] for r in tool_result_ids(m["content"])),
                default=start,
            )
            if last_user >= 0:
                earliest = min(earliest, last_user)
            if earliest < start:
                start, moved = earliest, True
        sizes.append(prefix[i + 1] - prefix[start])
    return sizes


INJECTED = ("is_meta", "is_compact_summary", "visible_in_transcript_only")


def _engine_message(i: int, message: Message) -> Msg:
    metadata = message.get("metadata") or {}
    injected = any(metadata.get(flag) is True for flag in INJECTED)
    return Msg(i, message["role"], message["content"], 0, flags={"meta": True} if injected else {})


def facts_sizes(messages: Sequence[Message]) -> list[int]:
    """Per message, the tokens of the facts a checkpoint made right after it would carry (the
    user's words, the todo list, files, open errors: ``compaction/facts.py``), counted whole."""
    sizes, facts = [], None
    for i, message in enumerate(messages):
        facts = facts_update(facts, [_engine_message(i, message)])
        sizes.append(TOKENIZER.count_text(render_facts(facts)) + 4)
    return sizes


def facts_size(messages: Sequence[Message]) -> int:
    return facts_sizes(messages)[-1] if messages else 0


def window_floor(turn: int, policy: Policy, factor: float) -> int:
    """The smallest window whose target holds ``turn`` (offline tokens), the summary budget and the
    request's framing. Counted as the service plans a run: in offline tokens, in the window divided
    by the model's calibration factor, with the summary budget divided by it too
    (``sessions_app/services/planning.py``)."""
    raw_policy = replace(policy, summary_budget=max(1, int(policy.summary_budget / factor)))
    fixed = turn + DEFAULT_FRAMING.request
    raw = math.ceil(fixed / policy.target_after)
    for _ in range(20):
        needed = math.ceil((fixed + raw_policy.summary_tokens(raw)) / policy.target_after)
        if needed <= raw:
            break
        raw = needed
    return math.ceil(raw * factor) + 1  # + 1: the service rounds the raw window down


# ----------------------------------------------------------------------------- one replay


@dataclass
class Point:
    """One succeeded compaction: where, what it did, and every method's scores per format."""

    messages: int
    level: str
    summary: bool
    usage: float
    scores: dict[str, dict[str, dict[str, Score]]]  # method → format → probe → score
    reflowed: int = 0  # ctxweb: human messages there only once whitespace is normalised (both formats)


@dataclass
class Replay:
    name: str
    size: int
    floor: int
    window: int = 0
    summaries: int = 0
    runs: Counter[str] = field(default_factory=Counter)
    points: list[Point] = field(default_factory=list)
    windows: list[tuple[int, int, bool]] = field(default_factory=list)  # (window, summaries, room) per replay
    without_before: int = 0  # runs the bench did not see coming (no context read before them)
    stepped_up: int = 0  # runs that stepped up to handoff, said in STATUS
    need: int = 0  # the smallest window with room at every compaction point for what must stay
    note: str = ""
    seconds: float = 0.0


class TokenCache:
    """Offline tokens of a message, counted once per content object (baselines reuse the history's)."""

    def __init__(self) -> None:
        self._seen: dict[int, tuple[Any, int]] = {}

    def __call__(self, message: Message) -> int:
        content = message["content"]
        hit = self._seen.get(id(content))
        if hit is not None and hit[0] is content:
            return hit[1]
        n = TOKENIZER.count_message(message["role"], content)
        self._seen[id(content)] = (content, n)
        return n


def formatted(messages: Sequence[Message], fmt: str) -> list[Message]:
    canonical = [{"role": m["role"], "content": m["content"]} for m in messages]
    if fmt == "openai":
        return engine_context.to_openai_messages(canonical, system=None)
    return engine_context.to_anthropic_messages(canonical)


def service_contexts(session: AgentSession) -> dict[str, dict[str, Any]]:
    return {fmt: model_context.session_context(session, fmt=fmt) for fmt in FORMATS}


def narrative(checkpoint: Checkpoint | None) -> str:
    """The summary baselines' text: the checkpoint's fields without the deterministic ``facts``."""
    if checkpoint is None:
        return ""
    return render_summary_text({k: v for k, v in checkpoint.data.items() if k != "facts"})


def replay_once(source: Source, window: int, user: User, tag: str, with_baselines: bool) -> Replay:
    replay = Replay(source.name, 0, 0, window)
    project, session = session_new(
        user=user,
        project_name=f"{tag} · {source.name} · {window}",
        preset_name=PRESET,
        name=source.name,
        model=source.model,
        window=window,
    )
    policy = usage.policy_for(session)
    factor = usage.model_info(source.model).calibration
    count = TokenCache()
    history: list[Message] = []
    seen: set[int] = set()
    started = time.perf_counter()
    for candidate in source.candidates:
        if (
            candidate.message is None
            or not recorded.append(session=session, candidates=[candidate], source="bench").created
        ):
            continue
        sent = candidate.message
        history.append({"role": sent.role, "content": sent.content, "metadata": sent.metadata})
        session.refresh_from_db()
        before = service_contexts(session) if usage.session_usage(session).level >= Level.COMPACT else None
        tasks.followup_send(session.pk)
        for record in new_compactions(project, seen):
            replay.runs[record.status] += 1
            if record.status != CompactionStatus.SUCCEEDED:
                continue
            session.refresh_from_db()
            after = service_contexts(session)
            made = Checkpoint.objects.filter(compaction=record).first()
            replay.summaries += made is not None
            status = after["anthropic"]["status"]
            used = status["used"] / status["context_window"]
            stepped_up = any(w.startswith(STEP_UP_NOTE) for w in status["warnings"])
            replay.stepped_up += stepped_up
            turn = turn_sizes(history, [count(m) for m in history])[-1] + facts_size(history)
            replay.need = max(replay.need, window_floor(turn, policy, factor))
            facts = probes.facts_of(history)
            views = {fmt: probes.view(after[fmt]["messages"], fmt) for fmt in FORMATS}
            scores = {
                "ctxweb": {
                    fmt: probes.score(
                        facts,
                        before[fmt]["messages"] if before is not None else None,
                        views[fmt],
                        usage=used,
                        target=policy.target_after,
                        stepped_up=stepped_up,
                    )
                    for fmt in FORMATS
                }
            }
            replay.without_before += before is None
            if with_baselines:
                summary = narrative(made or model_context.current_checkpoint(session))
                scores |= baseline_scores(history, facts, summary, window, factor, policy, count)
            reflowed = sum(probes.reflowed(facts, views[fmt]) for fmt in FORMATS)
            replay.points.append(Point(len(history), record.level, made is not None, used, scores, reflowed))
            before = after  # a second run on the same append starts from this context
        if session.status != SessionStatus.ACTIVE:
            replay.note = f"session {session.status.replace('_', ' ')}; replay stopped"
            break
    replay.seconds = time.perf_counter() - started
    return replay


def baseline_scores(
    history: Sequence[Message],
    facts: probes.Facts,
    summary: str,
    window: int,
    factor: float,
    policy: Policy,
    count: Callable[[Message], int],
) -> dict[str, dict[str, dict[str, Score]]]:
    canonical = [{"role": m["role"], "content": m["content"]} for m in history]
    usable = int(window * (1 - policy.output_reserve) / factor)  # in offline tokens, as ``count`` counts
    contexts = {
        "clear_tool_uses": anthropic_clear_tool_uses(canonical),
        "opencode": opencode_compact(canonical, summary, usable=usable, count=count),
        "claude_code": claude_code_compact(summary),
    }
    before = {fmt: formatted(canonical, fmt) for fmt in FORMATS}
    out: dict[str, dict[str, dict[str, Score]]] = {}
    for method, messages in contexts.items():
        used = calibrate(sum(count(m) for m in messages) + DEFAULT_FRAMING.request, factor) / window
        out[method] = {
            fmt: probes.score(
                facts,
                before[fmt],
                probes.view(formatted(messages, fmt), fmt),
                usage=used,
                target=policy.target_after,
            )
            for fmt in FORMATS
        }
    return out


def replay_at_third(source: Source, user: User, tag: str, with_baselines: bool) -> Replay:
    """One replay at a third of the session's calibrated size, whether or not it has room."""
    size = calibrated_size(source.candidates, source.model)
    replay = replay_once(source, max(1, size // 3), user, tag, with_baselines)
    replay.size, replay.windows = size, [(replay.window, replay.summaries, replay.need <= replay.window)]
    if replay.need > replay.window:
        replay.note = (replay.note + "; " if replay.note else "") + f"room for what must stay from {replay.need:,}"
    return replay


def replay_session(source: Source, user: User, tag: str, with_baselines: bool, start: int = 0) -> Replay:
    """Replays at the windows of the window rule (module docstring) until one has two summaries and
    room at every compaction point for what must stay. ``start``: another mode's window, tried first
    and kept if it has room here too, so that both modes are compared at one window."""
    policy = PRESETS[PRESET]
    sent = [c.message for c in source.candidates if c.message is not None]
    factor = usage.model_info(source.model).calibration
    tokens = [TOKENIZER.count_message(m.role, m.content) for m in sent]
    as_sent: list[Message] = [{"role": m.role, "content": m.content, "metadata": m.metadata} for m in sent]
    carried = facts_sizes(as_sent)
    floor = window_floor(
        max((t + f for t, f in zip(turn_sizes(as_sent, tokens), carried, strict=True)), default=0), policy, factor
    )
    size = calibrated_size(source.candidates, source.model)
    window = start or max(1, size // 3)
    lacking = 0  # the largest window tried that left a compaction point without room
    best: Replay | None = None  # of the replays with room everywhere: the most summaries, then the smallest window
    tried: list[tuple[int, int, bool]] = []
    total = 0.0
    for _ in range(MAX_REPLAYS):
        replay = replay_once(source, window, user, tag, with_baselines)
        total += replay.seconds
        tried.append((window, replay.summaries, replay.need <= window))
        if replay.need > window:
            lacking = max(lacking, window)
        elif best is None or (min(replay.summaries, WANTED_SUMMARIES), -window) > (
            min(best.summaries, WANTED_SUMMARIES),
            -best.window,
        ):
            best = replay
        if best is not None and (best.summaries >= WANTED_SUMMARIES or best.window == start):
            break
        if best is None:
            window = min(replay.need, floor)  # room for what the points found must keep
        else:  # smaller, but above what lacked room: 60 % of it, or halfway down when that lacked room
            window = max(int(best.window * SHRINK), (lacking + best.window) // 2)
        if window >= (best.window if best is not None else floor + 1) or any(window == w for w, _, _ in tried):
            break
    if best is None:  # every point of the session has room at the floor
        best = replay_once(source, floor, user, tag, with_baselines)
        total += best.seconds
        tried.append((floor, best.summaries, True))
    best.size, best.floor, best.windows, best.seconds = size, floor, tried, total
    if best.summaries < WANTED_SUMMARIES:
        best.note = (best.note + "; " if best.note else "") + "fewer than two summaries"
    return best


# ----------------------------------------------------------------------------- modes


@contextmanager
def summarizer(mode: str) -> Iterator[FakeAnthropic | None]:
    """The service's summarizer for a mode: offline as set up, or the local fake model."""
    if mode == "offline":
        yield None
        return
    with FakeAnthropic() as server:
        server.set_default_reply(json.dumps(FAKE_CHECKPOINT))
        server.queue_error(400, endpoint="count_tokens", times=10**9, message="counting is off in this bench")
        with override_settings(ANTHROPIC_API_KEY="bench-fake-key", ANTHROPIC_BASE_URL=server.base_url):
            yield server


def run_mode(
    mode: str, found: Sequence[Source], user: User, with_baselines: bool, windows: dict[str, int], *, third: bool
) -> tuple[list[Replay], str]:
    """The mode's replays, and what its summarizer did (the fake's requests). ``windows``: where to
    start each session (by name), when another mode chose its window already; ``third``: one replay
    at a third of each session's size instead of the window search."""
    with summarizer(mode) as server:
        replays = [
            replay_at_third(source, user, mode, with_baselines)
            if third
            else replay_session(source, user, mode, with_baselines, windows.get(source.name, 0))
            for source in found
        ]
        said = "" if server is None else f"; the fake model answered {len(server.requests_for('messages'))} requests"
    return replays, said


# ----------------------------------------------------------------------------- reporting


def pooled(replays: Sequence[Replay], method: str) -> dict[str, Score]:
    totals = dict.fromkeys(probes.PROBES, probes.NOT_APPLICABLE)
    for replay in replays:
        for point in replay.points:
            for scores in point.scores.get(method, {}).values():
                for probe, result in scores.items():
                    totals[probe] = totals[probe] + result
    return totals


def cell(result: Score) -> str:
    if not result.applicable:
        return "n/a"
    return f"{result.passed / result.total * 100:5.1f}% {result.passed}/{result.total}"


def short(result: Score) -> str:
    return "—" if not result.applicable else f"{result.passed / result.total * 100:.0f}"


def format_gaps(replays: Sequence[Replay], method: str) -> list[str]:
    """Probes whose share differs between the two formats."""
    shares: dict[str, dict[str, Score]] = {fmt: dict.fromkeys(probes.PROBES, probes.NOT_APPLICABLE) for fmt in FORMATS}
    for replay in replays:
        for point in replay.points:
            for fmt, scores in point.scores.get(method, {}).items():
                for probe, result in scores.items():
                    shares[fmt][probe] = shares[fmt][probe] + result
    return [
        f"{probe}: " + ", ".join(f"{fmt} {cell(shares[fmt][probe]).strip()}" for fmt in FORMATS)
        for probe in probes.PROBES
        if len({shares[fmt][probe] for fmt in FORMATS}) > 1
    ]


def print_sessions(mode: str, replays: Sequence[Replay], said: str) -> None:
    print(f"\n## {LABELS[mode]}: {len(replays)} sessions, {sum(r.seconds for r in replays):.0f} s{said}")
    header = " ".join(f"{n:>4}" for n in range(1, len(probes.PROBES) + 1))
    columns = f"{'size':>8} {'floor':>7} {'window':>7} {'sum':>3} {'runs':>9} {'up':>3} {'pts':>3}"
    print(f"  {'session':<44} {columns}  {header}")
    for r in replays:
        shares = pooled([r], "ctxweb")
        runs = f"{r.runs['succeeded']}/{r.runs['skipped']}/{r.runs['failed']}"
        print(
            f"  {r.name[:44]:<44} {r.size:>8,} {r.floor:>7,} {r.window:>7,} {r.summaries:>3} {runs:>9} "
            f"{r.stepped_up:>3} {len(r.points):>3}  " + " ".join(f"{short(shares[p]):>4}" for p in probes.PROBES)
        )
    notes = [r for r in replays if r.note or r.without_before or len(r.windows) > 1]
    for r in notes:
        tried = ", ".join(f"{w:,}→{s}{'' if room else ' (no room)'}" for w, s, room in r.windows)
        extra = f"; {r.without_before} runs with no context read before them" if r.without_before else ""
        print(f"    {r.name}: windows tried (summaries) {tried}{extra}{'; ' + r.note if r.note else ''}")


def print_table(rows: Sequence[tuple[str, Sequence[Replay], str]]) -> None:
    names = (
        "1 first request",
        "2 human msgs",
        "3 todo items",
        "4 files",
        "5 last three",
        "6 error lines",
        "7 overflow",
        "8 last prose",
    )
    width = 18
    print(f"\n{'method':<36}" + "".join(f"{n:>{width}}" for n in names))
    for label, replays, method in rows:
        totals = pooled(replays, method)
        print(f"{label:<36}" + "".join(f"{cell(totals[p]):>{width}}" for p in probes.PROBES))
    targets = [f"{'≥ ' if probes.TARGETS[p] < 1 else ''}{probes.TARGETS[p] * 100:.0f} %" for p in probes.PROBES]
    print(f"{'target':<36}" + "".join(f"{t:>{width}}" for t in targets))


def misses(replays: Sequence[Replay]) -> list[str]:
    totals = pooled(replays, "ctxweb")
    return [
        f"{probe} {cell(totals[probe]).strip()} (target {probes.TARGETS[probe]:.0%})"
        for probe in probes.PROBES
        if totals[probe].applicable and totals[probe].passed < probes.TARGETS[probe] * totals[probe].total
    ]


def as_json(replays: Sequence[Replay]) -> list[dict[str, Any]]:
    return [
        {
            "session": r.name,
            "size": r.size,
            "floor": r.floor,
            "window": r.window,
            "windows_tried": r.windows,
            "summaries": r.summaries,
            "runs": dict(r.runs),
            "note": r.note,
            "seconds": round(r.seconds, 2),
            "points": [
                {
                    "messages": p.messages,
                    "level": p.level,
                    "summary": p.summary,
                    "usage": round(p.usage, 4),
                    "reflowed": p.reflowed,
                    "scores": {
                        method: {
                            fmt: {probe: [s.passed, s.total] for probe, s in scores.items()}
                            for fmt, scores in by_format.items()
                        }
                        for method, by_format in p.scores.items()
                    },
                }
                for p in r.points
            ],
        }
        for r in replays
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--summarizer", choices=("offline", "fake", "both"), default="offline")
    parser.add_argument(
        "--window", choices=("search", "third"), default="search", help="the window rule, or a third of each size"
    )
    parser.add_argument("--files", nargs="+", type=Path, help="transcripts to replay (default: all shared ones)")
    parser.add_argument("--json", type=Path, help="write every session's points and scores here")
    parser.add_argument("--check", action="store_true", help="exit 1 when ctxweb misses a target")
    args = parser.parse_args()
    paths = args.files or sorted((SHARED / "claude_code").glob("*.jsonl")) + sorted(
        p for p in (SHARED / "openai").glob("*") if not p.name.startswith("LICENSE")
    )
    found = sources(paths)
    user = bench_user("continuation")
    modes = ("offline", "fake") if args.summarizer == "both" else (args.summarizer,)
    started = time.perf_counter()
    ran: dict[str, tuple[list[Replay], str]] = {}
    for mode in modes:
        chosen = {r.name: r.window for replays, _ in ran.values() for r in replays}
        ran[mode] = run_mode(mode, found, user, not ran, chosen, third=args.window == "third")
    results = {mode: replays for mode, (replays, _) in ran.items()}
    window_rule = "a third of each session's size" if args.window == "third" else "the window rule"
    print(
        f"{len(found)} sessions from {len(paths)} files, policy '{PRESET}', {window_rule}, "
        f"{time.perf_counter() - started:.0f} s; probe shares per session are ctxweb's, both formats pooled"
    )
    for mode, (replays, said) in ran.items():
        print_sessions(mode, replays, said)
    first = results[modes[0]]
    rows = [(LABELS[mode], replays, "ctxweb") for mode, replays in results.items()]
    rows += [(LABELS[method], first, method) for method in BASELINES]
    points = ", ".join(f"{mode} {sum(len(r.points) for r in replays)}" for mode, replays in results.items())
    print(f"\nAll compaction points ({points}), both formats pooled; passed/applicable:")
    print_table(rows)
    for mode, replays in results.items():
        usages = [p.usage for r in replays for p in r.points]
        if usages:
            print(f"{LABELS[mode]}: usage after a run at most {max(usages) * 100:.1f} % of the window")
        reflowed = sum(p.reflowed for r in replays for p in r.points)
        if reflowed:
            print(
                f"  {LABELS[mode]}: {reflowed} of the human messages missed (probes 1–2) are there once whitespace "
                "is normalised: the rendering reflows them"
            )
        for gap in format_gaps(replays, "ctxweb"):
            print(f"  formats differ ({LABELS[mode]}): {gap}")
    missed = {mode: misses(replays) for mode, replays in results.items()}
    for mode, missing in missed.items():
        print(f"{LABELS[mode]}: " + ("every target met" if not missing else "misses " + "; ".join(missing)))
    if args.json:
        args.json.write_text(json.dumps({mode: as_json(replays) for mode, replays in results.items()}, indent=1))
    return 1 if args.check and any(missed.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
