"""One compaction run: bring a session's usage down to its policy's target, whatever level set it off.

Hysteresis: a run never stops just under the threshold that triggered it, or the next few messages
cross it again (one run per handful of appends). It ends at ``target_after``, so the next run is
``(trigger - target) × window`` tokens of growth away.

- ``compact``: the reversible strategies first (when ``reversible_first``); if usage is still above
  the target, a summary of the oldest messages, only as many as must go.
- ``summarize`` and ``handoff``: a checkpoint of the oldest messages that do not fit verbatim under
  the target; the newest stay verbatim, up to it. (What the ``handoff`` level adds, a document or a
  continuation, is the service's.)
- A person's ``compact`` runs the reversible strategies alone; a person's ``summarize`` summarizes
  as above or, when nothing must go, all but the protected messages.

Units: raw offline tokens throughout (the caller converts budgets given in STATUS units).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import EngineError
from .policy import Policy
from .reversible import Change, apply_changes, plan_compact
from .summarize import Summarizer, SummaryPlan, plan_summarize
from .tokens import Tokenizer
from .types import Level, Msg

# Engine refusals that mean "summarizing can't help here", not "something broke".
NO_SUMMARY_POSSIBLE = frozenset({"nothing_to_summarize", "summary_too_large"})


@dataclass
class RunPlan:
    """What one run changes: reversible changes per message, then possibly a summary."""

    changes: list[Change]
    summary: SummaryPlan | None
    notes: list[str] = field(default_factory=list)


def plan_run(
    messages: Sequence[Msg],
    policy: Policy,
    *,
    level: Level,
    manual: bool,
    context_window: int,
    fixed_tokens: int,
    summary_tokens: int,
    tokenizer: Tokenizer,
    summarizer: Summarizer,
    previous: dict[str, Any] | None = None,
    instructions: str = "",
    now: str,
) -> RunPlan:
    """The run for ``level`` over the session's context ``messages`` (seq order). ``fixed_tokens``:
    system prompt, tools and request framing; ``summary_tokens``: the current checkpoint's message."""
    target = policy.target_after * context_window
    # Pruning is the compact level's (and a person's compact request is nothing else); the summarize
    # and handoff levels summarize, and what stays stays verbatim.
    prune = level == Level.COMPACT and (manual or policy.reversible_first)
    changes = plan_compact(messages, policy, context_window=context_window, tokenizer=tokenizer) if prune else []
    run = RunPlan(changes, None)
    if level == Level.COMPACT:
        if manual:
            return run
        pruned = sum(m.tokens for m in messages) - sum(c.saved for c in changes)
        if fixed_tokens + pruned + summary_tokens <= target:
            run.notes.append(f"Reversible compaction alone brought usage to the target ({policy.target_after:.0%}).")
            return run
        # Then summarize only what still does not fit: the split is made on the pruned sizes. Not
        # counting duplicate references: one whose original the summary replaces is dropped below,
        # and the tail must fit without its saving.
        basis = apply_changes(messages, [c for c in changes if not c.refers_to])
    else:
        basis = list(messages)
    try:
        summary = plan_summarize(
            basis,
            policy,
            context_window=context_window,
            tokenizer=tokenizer,
            summarizer=summarizer,
            previous=previous,
            instructions=instructions,
            now=now,
            force=manual,
            fixed_tokens=fixed_tokens,
            target_tokens=target,
            originals=messages,
        )
    except EngineError as exc:
        if exc.code not in NO_SUMMARY_POSSIBLE:
            raise
        # Not a fault: the session is too short to split, or a summary would not be smaller. The
        # reversible part still stands; the note says why there is no checkpoint.
        run.notes.append(str(exc))
        return run
    gone = set(summary.summarized_seqs)
    # A kept message must not point the model at a message the summary replaces: such duplicate
    # references are not made, and those messages stay as they were.
    run.changes = [c for c in changes if c.seq in gone or not gone.intersection(c.refers_to)]
    run.summary = summary
    return run
