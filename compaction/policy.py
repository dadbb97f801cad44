"""Compaction policy: thresholds, reserves, keep-recent rules, and the presets.

The four requirement documents ctxweb grew from disagree on numbers; each becomes a preset
(``adk``, ``kai``, ``gsd``, ``brainchain``) rather than one hard-coded choice. ``default`` is
ctxweb's own. All of them: docs/POLICIES.md, "Presets".
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from . import model_catalog, redact
from .types import Level, Thresholds

# The smallest summary worth writing: the header, an objective and the latest request, shortened.
MIN_SUMMARY_TOKENS = 100
# What a summarizer is asked to write at most: its narrative and lists. The rest of a checkpoint's
# budget is for the facts the session itself gives (the user's words, the todo list, files, errors).
SUMMARIZER_TOKENS = 1_000
DEFAULT_PRESERVE_PATTERNS: tuple[str, ...] = (r"^## Decision:", r"^ADR-\d+", r"error|fail|critical")
# The newest turns no strategy touches, whatever keep_recent_messages says: the work of the last
# minute (the latest call, its results, what the agent said of it) is what an agent goes on from.
NEWEST_UNTOUCHED = 3
# The facts a handoff's or an imported compaction's checkpoint carries verbatim (compaction/facts.py)
# may take this share of the window; a summary gives them the room the protected newest turns leave.
FACTS_SHARE = 0.15
# Who may write a policy's summaries, and a model of each provider to suggest.
SUMMARIZER_PROVIDERS: dict[str, str] = {"anthropic": "Anthropic", "openai": "OpenAI", "offline": "Offline"}
SUGGESTED_SUMMARIZER_MODELS = {"anthropic": "claude-haiku-4-5", "openai": "gpt-4o-mini"}


@dataclass(frozen=True)
class Policy:
    remind: float = 0.60
    compact: float = 0.70
    summarize: float = 0.85
    handoff: float = 0.95
    # The same thresholds in tokens (seed 002's "compact above 90k"; Anthropic's compaction trigger is in
    # input tokens): one set takes the place of its fraction on a window larger than it (for_window).
    remind_tokens: int | None = None
    compact_tokens: int | None = None
    summarize_tokens: int | None = None
    handoff_tokens: int | None = None
    # Share of the window kept free for the model's reply (the `kai` preset keeps 15 %).
    output_reserve: float = 0.10
    # Never compact the newest N user turns, nor the newest T tokens of tool output (OpenCode's rule
    # protects 40,000). 0 by default: a cleared output keeps its paths and error lines and a revert
    # restores it, so the newest turns suffice, as the newest tool uses do for Anthropic's
    # clear_tool_uses — and compaction saves at least what that saves (docs/BENCHMARKS.md).
    keep_recent_turns: int = 2
    protect_tool_tokens: int = 0
    # A run brings usage down to target_after (hysteresis: the next run is a real step away).
    target_after: float = 0.50
    target_after_tokens: int | None = None
    # At the compact level, reversible strategies run before any summary (`gsd` and `kai` only summarize).
    reversible_first: bool = True
    # A summary keeps the newest messages verbatim, up to the target and at most tail_fraction of
    # the window (`kai`: 30 %). The newest keep_recent_messages are never touched by any strategy.
    tail_fraction: float = 0.50
    keep_recent_messages: int = 2
    # The whole checkpoint as the model reads it, facts included (STATUS's "summary" stays under it).
    summary_budget: int = 10_000
    min_saving_tokens: int = 500
    revert_hours: int = 24
    prune_days: int = 30
    context_doc_max_lines: int = 500
    auto: bool = True
    # At the handoff level: close the session and continue in a fresh linked one (`brainchain`).
    auto_continue: bool = False
    # Requests through the Anthropic-compatible proxy go upstream as the compacted context (opt-in).
    proxy_compaction: bool = False
    # Who writes summaries: a model of this provider (with the project's key, else the server's; the
    # offline extractive summarizer when there is none), or always the offline one.
    summarizer_provider: str = "anthropic"
    summarizer_model: str = "claude-haiku-4-5"
    preserve_patterns: tuple[str, ...] = field(default=DEFAULT_PRESERVE_PATTERNS)
    # Secrets in what is stored (``compaction.redact``): the kinds not looked for (false positives), and
    # the project's own patterns (kind ``custom``; a pattern's first group, if it has one, is the secret).
    redact_off: tuple[str, ...] = ()
    redact_patterns: tuple[str, ...] = ()

    @property
    def thresholds(self) -> Thresholds:
        return Thresholds(self.remind, self.compact, self.summarize, self.handoff)

    def for_window(self, context_window: int) -> Policy:
        """The policy as it acts on a window of ``context_window`` tokens: each threshold set in tokens
        takes the place of its fraction (tokens ÷ window), unless it is at or above the window, where the
        fraction stays (a 90k trigger on a 32k model still compacts at its fraction). The levels stay in
        order and the target below the compact threshold, so the result passes ``validate``. Its token
        fields are spent (None): resolving it again, for whatever window, changes nothing."""
        if all(getattr(self, name) is None for name in TOKEN_FIELDS.values()):
            return self
        window = max(1, context_window)
        held = {
            name: tokens / window
            for name, tokens in ((name, getattr(self, field)) for name, field in TOKEN_FIELDS.items())
            if tokens is not None and tokens < window
        }
        levels = _in_order({name: getattr(self, name) for name in THRESHOLD_NAMES}, held)
        compact = levels["compact"]
        target = held.get("target_after", self.target_after)
        if target >= compact:
            # Without the gap every run would end just under the trigger (validate's rule).
            target = max(0.05, compact - 0.20)
            if target >= compact:  # a trigger of a few thousand tokens on a very large window
                target = compact / 2
        # The verbatim tail after a summary stays under the summarize threshold (validate's rule); a
        # tail that fits under the target is what a run ends with anyway.
        tail = self.tail_fraction if self.tail_fraction < levels["summarize"] else target
        spent: dict[str, Any] = dict.fromkeys(TOKEN_FIELDS.values())
        return replace(
            self,
            remind=levels["remind"],
            compact=compact,
            summarize=levels["summarize"],
            handoff=levels["handoff"],
            target_after=target,
            tail_fraction=tail,
            **spent,
        )

    def protected_tool_tokens(self, context_window: int) -> int:
        """The tool-output tokens never pruned: the policy's figure, capped at 20 % of the window."""
        return min(self.protect_tool_tokens, int(context_window * 0.20))

    def summary_tokens(self, context_window: int) -> int:
        """What the summarizer may write: ``SUMMARIZER_TOKENS`` within the budget, capped at 10 % of
        the window so that the summary leaves room under the target for the verbatim tail."""
        return max(MIN_SUMMARY_TOKENS, min(SUMMARIZER_TOKENS, self.summary_budget, int(context_window * 0.10)))

    def checkpoint_tokens(self) -> int:
        """The budget of the whole checkpoint, facts included (``compaction.room``)."""
        return max(MIN_SUMMARY_TOKENS, self.summary_budget)

    def facts_tokens(self, context_window: int) -> int:
        """Room for the checkpoint's facts (the user's words, the todo list, files, open errors)."""
        return max(MIN_SUMMARY_TOKENS, int(context_window * FACTS_SHARE))

    def protected_count(self, roles: Sequence[str]) -> int:
        """How many of the newest messages (given by their roles, oldest first) every strategy leaves
        as they are: ``keep_recent_messages``, and never fewer than the newest ``NEWEST_UNTOUCHED``
        turns as a model sees them — consecutive tool results (stored one message each) are one turn."""
        turns, count, previous = 0, 0, None
        for role in reversed(roles):
            side = "assistant" if role == "assistant" else "user"
            if side != previous:
                if turns == NEWEST_UNTOUCHED:
                    break
                turns += 1
                previous = side
            count += 1
        return max(self.keep_recent_messages, count)

    def min_saving(self, context_window: int) -> int:
        """The least a run must free to be worth it: the policy's figure, capped at 5 % of the window
        so that a small window is not left full for want of a saving that is large for it."""
        return min(self.min_saving_tokens, int(context_window * 0.05))

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for name in LIST_FIELDS:
            data[name] = list(getattr(self, name))
        return data

    @classmethod
    def from_mapping(cls, values: dict[str, Any]) -> Policy:
        names = {f.name for f in fields(cls)}
        picked = {k: v for k, v in values.items() if k in names}
        for name in LIST_FIELDS:
            if name in picked:
                picked[name] = tuple(picked[name] or ())
        return cls(**picked)


# The settings that are lists of strings (tuples here, lists in JSON).
LIST_FIELDS = ("preserve_patterns", "redact_off", "redact_patterns")
# What a preset leaves as it is: a project's own view of its secrets is not a matter of thresholds.
NOT_IN_PRESETS = ("redact_off", "redact_patterns")


# Each fraction and the field that gives it in tokens instead.
THRESHOLD_NAMES = ("remind", "compact", "summarize", "handoff")
TOKEN_FIELDS: dict[str, str] = {name: f"{name}_tokens" for name in (*THRESHOLD_NAMES, "target_after")}
MIN_THRESHOLD_TOKENS, MAX_THRESHOLD_TOKENS = 1_000, 10_000_000

PRESETS: dict[str, Policy] = {
    "default": Policy(),
    # adk: raw < 70 % ≤ compact < 85 % ≤ summarize < 95 % ≤ handoff; summary < 500 tokens; at least
    # 30 % saved by a compaction (70 % → 45 %); revert within 24 h; archive after 30 days; project
    # context ≤ 500 lines.
    "adk": Policy(
        remind=0.70,
        compact=0.70,
        summarize=0.85,
        handoff=0.95,
        target_after=0.45,
        summary_budget=500,
        revert_hours=24,
        prune_days=30,
        context_doc_max_lines=500,
    ),
    # kai: summarize the head at 65 % to under 50 %, the tail in 30 % of the window, 15 % reserved
    # for output. No reversible step and no handoff, so the handoff threshold sits at the top.
    "kai": Policy(
        remind=0.65,
        compact=0.65,
        summarize=0.65,
        handoff=1.0,
        target_after=0.45,
        reversible_first=False,
        output_reserve=0.15,
        tail_fraction=0.30,
        keep_recent_messages=0,
    ),
    # gsd: a checkpoint compaction when total tokens exceed 90k (90 % of its 100k limit): a summary, no
    # pruning. Compact and summarize at 90,000 tokens on a larger window, at 90 % on one of 90k or less.
    "gsd": Policy(
        remind=0.90,
        compact=0.90,
        summarize=0.90,
        handoff=1.0,
        compact_tokens=90_000,
        summarize_tokens=90_000,
        reversible_first=False,
    ),
    # brainchain: remind 70 %; at 85 % prune tool output and summarize old messages; at 95 %
    # summarize the whole session and go on in a fresh linked session; 10 recent messages untouched.
    "brainchain": Policy(
        remind=0.70,
        compact=0.85,
        summarize=0.85,
        handoff=0.95,
        keep_recent_messages=10,
        auto_continue=True,
    ),
}


def _in_order(fractions: dict[str, float], held: dict[str, float]) -> dict[str, float]:
    """The four thresholds in order, those in ``held`` (given in tokens) as they are: a fraction
    between two of them is brought within them (gsd's remind at 90 % comes down to its 90k compact on
    a 200k window). Then each is at least the one below, for input whose held values are out of order."""
    levels: dict[str, float] = {}
    for i, name in enumerate(THRESHOLD_NAMES):
        if name in held:
            levels[name] = held[name]
            continue
        below = [held[n] for n in THRESHOLD_NAMES[:i] if n in held]
        above = [held[n] for n in THRESHOLD_NAMES[i + 1 :] if n in held]
        levels[name] = min([max([fractions[name], *below]), *above])
    for lower, upper in itertools.pairwise(THRESHOLD_NAMES):
        levels[upper] = max(levels[upper], levels[lower])
    return levels


def preset(name: str) -> Policy:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}") from None


def level_for(fraction: float, thresholds: Thresholds) -> Level:
    if fraction >= thresholds.handoff:
        return Level.HANDOFF
    if fraction >= thresholds.summarize:
        return Level.SUMMARIZE
    if fraction >= thresholds.compact:
        return Level.COMPACT
    if fraction >= thresholds.remind:
        return Level.REMIND
    return Level.OK


MAX_PATTERN_CHARS = 500
# A quantified group whose body is itself quantified: the shape of catastrophic backtracking.
NESTED_QUANTIFIER = re.compile(r"\((?:[^()\\]|\\.)*[+*}](?:[^()\\]|\\.)*\)\s*(?:[+*]|\{\d*,)")


def _pattern_problem(patterns: Any) -> str:
    """What is wrong with a list of preserve patterns, or ''."""
    if isinstance(patterns, str) or not isinstance(patterns, list | tuple):
        return "A list of regular expressions."
    for pattern in patterns:
        if not isinstance(pattern, str) or not pattern:
            return "Each pattern is a non-empty regular expression."
        if len(pattern) > MAX_PATTERN_CHARS:
            return f"A pattern is at most {MAX_PATTERN_CHARS} characters."
        try:
            re.compile(pattern)
        except (re.error, OverflowError, RecursionError, ValueError) as exc:
            return f"{pattern!r} is not a valid regular expression: {exc}."
        if NESTED_QUANTIFIER.search(pattern):
            # (a+)+ and the like take exponential time on a line that almost matches; every message's
            # lines are matched against these patterns, so one such pattern could stall a worker.
            return f"{pattern!r} repeats a group that itself repeats (like (a+)+); write it without the nesting."
    return ""


def _kinds_problem(kinds: Any) -> str:
    """What is wrong with a list of redaction kinds to switch off, or ''."""
    known = [*redact.kinds(), redact.CUSTOM]
    if isinstance(kinds, str) or not isinstance(kinds, list | tuple):
        return "A list of kinds of secret."
    unknown = [k for k in kinds if k not in known]
    if unknown:
        return f"Unknown kind {unknown[0]!r}: one of {', '.join(known)}."
    return ""


def validate(values: dict[str, Any]) -> dict[str, str]:
    """Field name → what is wrong with it. Empty when the values make a usable policy."""
    errors: dict[str, str] = {}
    order = THRESHOLD_NAMES
    for name in order:
        value = values.get(name)
        if not isinstance(value, int | float) or isinstance(value, bool) or not 0 < value <= 1:
            errors[name] = "Must be a fraction of the window above 0 and at most 1 (e.g. 0.7 for 70 %)."
    if not errors:
        for lower, upper in itertools.pairwise(order):
            if values[lower] > values[upper]:
                errors[upper] = f"Must be at least the {lower} threshold ({values[lower]:g})."
    target = values.get("target_after")
    compact = values.get("compact")
    if target is not None:
        if not isinstance(target, int | float) or isinstance(target, bool) or not 0 < target < 1:
            errors["target_after"] = "A run's target is a share of the window above 0 and below 1."
        elif isinstance(compact, int | float) and "compact" not in errors and target >= compact:
            # Without the gap every run would end just under the trigger and the next append cross it.
            errors["target_after"] = f"Must be below the compact threshold ({compact:g}), or runs never end."
    errors.update(_token_problems(values))
    for name in ("preserve_patterns", "redact_patterns"):
        patterns = values.get(name)
        if patterns is not None and (problem := _pattern_problem(patterns)):
            errors[name] = problem
    off = values.get("redact_off")
    if off is not None and (problem := _kinds_problem(off)):
        errors["redact_off"] = problem
    errors.update(_summarizer_problems(values.get("summarizer_provider"), values.get("summarizer_model")))
    reserve = values.get("output_reserve")
    if reserve is not None and not 0 <= reserve < 0.5:
        errors["output_reserve"] = "Reserve a share of the window from 0 up to (not including) 0.5."
    tail = values.get("tail_fraction")
    if tail is not None and not 0 < tail < 1:
        errors["tail_fraction"] = "The kept tail is a share of the window above 0 and below 1."
    summarize = values.get("summarize")
    if tail is not None and "tail_fraction" not in errors and isinstance(summarize, int | float) and tail >= summarize:
        errors["tail_fraction"] = (
            "The kept tail must be smaller than the summarize threshold, or summarizing frees nothing."
        )
    for name, low, high in (
        ("summary_budget", MIN_SUMMARY_TOKENS, 200_000),
        ("keep_recent_messages", 0, 1_000),
        ("keep_recent_turns", 0, 100),
        ("protect_tool_tokens", 0, 1_000_000),
        ("min_saving_tokens", 0, 1_000_000),
        ("revert_hours", 1, 24 * 365),
        ("prune_days", 1, 3650),
        ("context_doc_max_lines", 10, 1_000_000),
    ):
        value = values.get(name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high):
            errors[name] = f"Must be a whole number from {low:,} to {high:,}."
    return errors


def _token_problems(values: dict[str, Any]) -> dict[str, str]:
    """The thresholds given in tokens: each unset or a whole number in range, the ones set in the
    order of their levels, and a run's target below the compact trigger when both are set."""
    errors: dict[str, str] = {}
    given: dict[str, int] = {}
    low, high = MIN_THRESHOLD_TOKENS, MAX_THRESHOLD_TOKENS
    for name in TOKEN_FIELDS.values():
        value = values.get(name)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            errors[name] = f"Leave it empty, or a whole number of tokens from {low:,} to {high:,}."
        else:
            given[name] = value
    thresholds = [TOKEN_FIELDS[name] for name in THRESHOLD_NAMES if TOKEN_FIELDS[name] in given]
    for lower, upper in itertools.pairwise(thresholds):
        if given[lower] > given[upper] and upper not in errors:
            errors[upper] = f"Must be at least {lower} ({given[lower]:,})."
    target, compact = given.get("target_after_tokens"), given.get("compact_tokens")
    if target is not None and compact is not None and target >= compact:
        errors["target_after_tokens"] = f"Must be below compact_tokens ({compact:,}), or runs never end."
    return errors


def _summarizer_problems(provider: Any, model: Any) -> dict[str, str]:
    """A provider ctxweb can call, and a model of that provider (the offline summarizer has none)."""
    if provider is None:
        return {}
    if not isinstance(provider, str) or provider not in SUMMARIZER_PROVIDERS:
        return {"summarizer_provider": f"One of {', '.join(SUMMARIZER_PROVIDERS)}."}
    if provider == "offline" or not isinstance(model, str):
        return {}
    spec = model_catalog.spec_for(model) if model.strip() else None
    if spec is None or spec.provider != provider:
        label, example = SUMMARIZER_PROVIDERS[provider], SUGGESTED_SUMMARIZER_MODELS[provider]
        return {"summarizer_model": f"{model!r} is not an {label} model ctxweb knows (e.g. {example})."}
    return {}
