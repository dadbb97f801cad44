"""Summarizing: split a session into head and tail, turn the head into a checkpoint.

The tail is what stays verbatim: the newest messages that fit ``tail_fraction`` of the window, at
least ``keep_recent_messages`` of them, always the last user message, and never a tool result
without its call. The head becomes a checkpoint, merged with the previous one, that enters the
context as one ``<context_summary>`` message before the tail (docs/COMPACTION.md, "Summaries and
checkpoints"). Summaries are lossy and must be smaller than what they replace.

What the checkpoint carries is fitted to the room the run has (``compaction.room``).

Summarizers share one protocol: the models' (``ModelSummarizer``: a small model through its
provider's official SDK, JSON out, one repair attempt; ``AnthropicSummarizer`` and ``OpenAISummarizer``
in ``model_summarizer.py`` and ``openai_summarizer.py``) and the offline, deterministic
``ExtractiveSummarizer`` (in ``extractive.py``). Their errors carry ``permanent``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .checkpoint import (
    files_touched,
    merge_checkpoint,
    render_summary_text,
)
from .context import summary_message
from .errors import EngineError
from .extractive import ExtractiveSummarizer, fit_to_budget
from .facts import facts_update
from .messages import tool_result_ids, tool_use_ids
from .model_summarizer import SYSTEM_PROMPT, AnthropicSummarizer, ModelSummarizer, render_transcript
from .policy import MIN_SUMMARY_TOKENS, Policy
from .room import checkpoint_tokens, fit_checkpoint
from .tokens import Tokenizer
from .types import Msg

__all__ = [
    "SYSTEM_PROMPT",
    "AnthropicSummarizer",
    "ExtractiveSummarizer",
    "ModelSummarizer",
    "Summarizer",
    "SummaryPlan",
    "plan_summarize",
    "render_transcript",
    "split_tail",
]


class Summarizer(Protocol):
    name: str

    def summarize(
        self,
        messages: Sequence[Msg],
        *,
        previous: dict[str, Any] | None = None,
        budget: int,
        instructions: str = "",
    ) -> dict[str, Any]:
        """Checkpoint fields for ``messages``, merged with ``previous``'s; raises ``EngineError``."""
        ...


@dataclass
class SummaryPlan:
    checkpoint: dict[str, Any]
    summary_text: str
    summary_tokens: int  # the <context_summary> message, framing included
    summarized_seqs: list[int]
    kept_tokens: int  # the tail
    lossy: bool = True


def split_tail(
    messages: Sequence[Msg],
    policy: Policy,
    *,
    context_window: int,
    minimal: bool = False,
    limit: float | None = None,
    hard_limit: float | None = None,
) -> int:
    """Index of the first tail message: the newest messages that fit ``tail_fraction`` of the window
    and ``limit`` (the tokens left for them under the run's target), contiguous from the end.

    Never fewer than ``policy.protected_count``: those are protected from every strategy, so they stay
    even when they alone pass the limit — unless they would pass ``hard_limit`` (the room left in
    the window itself): a session that can't be sent helps nobody, so then the tail keeps only the
    newest messages that fit it. Always: the last user message stays, and a tool result never loses
    its call to the head. ``minimal``: only the protected messages (and what they need), for a
    summary someone asked for while everything would fit."""
    n = len(messages)
    budget = 0.0 if minimal else policy.tail_fraction * context_window
    if limit is not None:
        budget = min(budget, max(0.0, limit))
    fitting, total = 0, 0
    for m in reversed(messages):
        if total + m.tokens > budget:
            break
        total += m.tokens
        fitting += 1
    users = [i for i, m in enumerate(messages) if m.role in ("user", "tool")]
    call_at = {call: i for i, m in enumerate(messages) for call in tool_use_ids(m.content)}

    def start_for(count: int) -> int:
        start = n - count
        if users and users[-1] < start:
            start = users[-1]  # the last user message stays verbatim
        # A tool result keeps its call: start the tail at the message that made the earliest call
        # answered in the tail (results may come several messages after their call).
        while start > 0:
            answered = {r for m in messages[start:] for r in tool_result_ids(m.content)}
            callers = [call_at[i] for i in answered if call_at.get(i, n) < start]
            if not callers:
                break
            start = min(callers)
        return start

    floor = min(n, policy.protected_count([m.role for m in messages]))
    count = min(n, max(fitting, floor))
    start = start_for(count)
    # Pulling in a call (or the last user message) can push the tail past its budget: give back
    # messages from its old end, down to the protected ones (and below them only past the window).
    while count > floor and sum(m.tokens for m in messages[start:]) > budget:
        count -= 1
        start = start_for(count)
    while hard_limit is not None and count > 1 and sum(m.tokens for m in messages[start:]) > hard_limit:
        count -= 1
        start = start_for(count)
    return start


def summary_tokens_of(text: str, tokenizer: Tokenizer) -> int:
    return tokenizer.count_message("user", summary_message(text)["content"])


def plan_summarize(
    messages: Sequence[Msg],
    policy: Policy,
    *,
    context_window: int,
    tokenizer: Tokenizer,
    summarizer: Summarizer,
    previous: dict[str, Any] | None = None,
    instructions: str = "",
    now: str,
    force: bool = False,
    fixed_tokens: int = 0,
    target_tokens: float | None = None,
    originals: Sequence[Msg] = (),
) -> SummaryPlan:
    """What summarizing would do: which messages the checkpoint replaces, and the checkpoint.

    ``target_tokens``: what the whole context may hold after the run (default: the policy's
    ``target_after`` of the window); the tail keeps what fits under it next to ``fixed_tokens``
    (system prompt, tools) and the summary. ``force`` (a person asked): when what must go is no
    larger than a summary, keep only the minimal tail."""
    part = policy.summary_tokens(context_window)  # the summarizer's
    target = policy.target_after * context_window if target_tokens is None else target_tokens
    unpruned = {m.seq: m for m in originals}
    earlier_facts = previous.get("facts") if previous else None
    # Room is planned (compaction/room.py): the checkpoint's essentials (the user's words, the newest
    # prose, the todo list, open errors, files, decisions) may take the window's room, before the
    # protected newest messages do; the rest of it only what the target leaves beside them.
    everything = facts_update(earlier_facts, [unpruned.get(m.seq, m) for m in messages])
    protected_start = split_tail(messages, policy, context_window=context_window, minimal=True)
    protected = sum(m.tokens for m in messages[protected_start:])
    window_room = int((1 - policy.output_reserve) * context_window - fixed_tokens)
    target_room = int(target - fixed_tokens)
    cap = max(MIN_SUMMARY_TOKENS, min(policy.checkpoint_tokens(), window_room))
    in_tail = {m.seq for m in messages[protected_start:]}
    facts_all = {**everything, "recent_prose": [p for p in everything["recent_prose"] if p["seq"] not in in_tail]}
    estimate = _planned_tokens(
        facts_all, tokenizer, part, room=target_room - protected, cap=cap, budget=policy.checkpoint_tokens()
    )
    start = split_tail(
        messages,
        policy,
        context_window=context_window,
        limit=target_room - estimate,
        hard_limit=window_room - estimate,
    )
    if force and sum(m.tokens for m in messages[:start]) <= part:
        # A person asked for a summary though (almost) nothing must go: the checkpoint covers all but
        # the protected messages, rather than a head too small to be worth summarizing.
        start = split_tail(
            messages,
            policy,
            context_window=context_window,
            minimal=True,
            limit=target_room - estimate,
            hard_limit=window_room - estimate,
        )
    room = _Room(
        messages=messages,
        policy=policy,
        tokenizer=tokenizer,
        summarizer=summarizer,
        previous=previous,
        instructions=instructions,
        now=now,
        unpruned=unpruned,
        everything=everything,
        part=part,
        cap=cap,
        budget=policy.checkpoint_tokens(),
        target_room=target_room,
        window_room=window_room,
    )
    if start == 0:
        raise EngineError(
            "Nothing to summarize: every message is in the tail that stays verbatim.",
            permanent=True,
            code="nothing_to_summarize",
        )
    plan = _summary_at(start, room)
    if fixed_tokens + plan.kept_tokens + plan.summary_tokens > target:
        # The checkpoint came out larger than planned (what is never cut past the budget): the tail
        # gives back what the target has no room for, and the checkpoint is made again once.
        again = split_tail(
            messages,
            policy,
            context_window=context_window,
            limit=target_room - plan.summary_tokens,
            hard_limit=window_room - plan.summary_tokens,
        )
        if again > start:
            plan = _summary_at(again, room)
    return plan


@dataclass
class _Room:
    """What one summary plan is made of, whichever message its tail starts at."""

    messages: Sequence[Msg]
    policy: Policy
    tokenizer: Tokenizer
    summarizer: Summarizer
    previous: dict[str, Any] | None
    instructions: str
    now: str
    unpruned: dict[int, Msg]
    everything: dict[str, Any]
    part: int  # the summarizer's share
    cap: int  # the whole checkpoint, at most: the budget and the window's room
    budget: int  # the policy's: the newest prose is cut only past it
    target_room: int  # under the target, beside the system prompt and tools
    window_room: int  # in the window, beside them and the reply's reserve


def _summary_at(start: int, room: _Room) -> SummaryPlan:
    """The checkpoint of ``room.messages[:start]``, the tail from ``start`` kept verbatim."""
    messages, tokenizer, previous = room.messages, room.tokenizer, room.previous
    everything = room.everything
    earlier_facts = previous.get("facts") if previous else None
    head, tail = list(messages[:start]), list(messages[start:])
    head_originals = [room.unpruned.get(m.seq, m) for m in head]
    kept_tokens = sum(m.tokens for m in tail)
    # The todo list, the open errors and the current work as they stand now, even when what last
    # changed them is in the kept tail: a list updated piece by piece (TaskUpdate) would otherwise be
    # half in the checkpoint, half in the tail, and an error fixed in the tail is no longer open.
    # The newest prose stays verbatim: the pieces the tail holds are there in place, the others are
    # carried word for word (compaction/prose.py).
    kept = {m.seq for m in tail}
    facts = {
        **facts_update(earlier_facts, head_originals),
        **{name: everything[name] for name in ("todos", "errors", "current_work")},
        "recent_prose": [p for p in everything["recent_prose"] if p["seq"] not in kept],
    }
    room_now = max(MIN_SUMMARY_TOKENS, min(room.cap, room.target_room - kept_tokens))
    cap_now = max(room_now, min(room.cap, room.window_room - kept_tokens))
    essentials = checkpoint_tokens(
        fit_checkpoint({"facts": facts}, tokenizer, room=room_now, cap=cap_now, budget=room.budget), tokenizer
    )
    budget = min(room.part, max(MIN_SUMMARY_TOKENS, room_now - essentials))
    fields = room.summarizer.summarize(head_originals, previous=previous, budget=budget, instructions=room.instructions)
    fields = {**fields, "files_modified": files_touched(fields.get("files_modified") or [], everything)}
    stamps = sorted(m.created_at for m in head if m.created_at)
    checkpoint = merge_checkpoint(
        previous,
        fields,
        messages_compacted=len(head),
        oldest=stamps[0] if stamps else None,
        newest=stamps[-1] if stamps else None,
        compacted_at=room.now,
        facts=facts,
    )
    checkpoint = fit_checkpoint(
        fit_to_budget(checkpoint, tokenizer, budget), tokenizer, room=room_now, cap=cap_now, budget=room.budget
    )
    text = render_summary_text(checkpoint)
    tokens = summary_tokens_of(text, tokenizer)
    previous_tokens = (
        summary_tokens_of(previous.get("summary_text") or render_summary_text(previous), tokenizer) if previous else 0
    )
    replaced = sum(m.tokens for m in head) + previous_tokens
    if tokens >= replaced:
        raise EngineError(
            f"The summary ({tokens:,} tokens) would not be smaller than what it replaces ({replaced:,}).",
            permanent=True,
            code="summary_too_large",
        )
    return SummaryPlan(
        checkpoint=checkpoint,
        summary_text=text,
        summary_tokens=tokens,
        summarized_seqs=[m.seq for m in head],
        kept_tokens=kept_tokens,
    )


def _planned_tokens(facts: dict[str, Any], tokenizer: Tokenizer, part: int, *, room: int, cap: int, budget: int) -> int:
    """What a checkpoint carrying ``facts`` will take, planned as ``fit_checkpoint`` cuts it: the
    facts first, then the summarizer's ``part`` in what the room leaves."""
    room = max(MIN_SUMMARY_TOKENS, min(cap, room))
    fitted = checkpoint_tokens(
        fit_checkpoint({"facts": facts}, tokenizer, room=room, cap=cap, budget=budget), tokenizer
    )
    return fitted + min(part, max(0, room - fitted))
