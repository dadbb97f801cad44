"""Measuring the offline estimate against what Claude actually counted.

Every assistant line of a Claude Code transcript records the API's ``usage``; the context the model
saw is ``input + cache_creation + cache_read`` tokens. Between two consecutive requests the context
grows by exactly the messages in between (the assistant's reply, the tool results, the next
prompt), so comparing that growth with our estimate of those messages measures the estimator on
real traffic, without needing the hidden system prompt or tool definitions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .tokens import OfflineTokenizer
from .transcripts import Conversation


@dataclass(frozen=True)
class Growth:
    """One step between two recorded requests: what we estimate the new messages cost, and what Claude counted."""

    estimated: int
    actual: int


def growth_steps(conversation: Conversation, tokenizer: OfflineTokenizer) -> list[Growth]:
    """Consecutive request pairs inside one segment (no compaction boundary between them) whose
    context grew; a rewind or a compaction makes the context shrink and says nothing about counting."""
    counts = [tokenizer.count_message(m["role"], m["content"]) for m in conversation.messages]
    prefix = [0]
    for n in counts:
        prefix.append(prefix[-1] + n)
    boundaries = sorted(conversation.segment_starts)
    steps: list[Growth] = []
    points = sorted(conversation.usage_points, key=lambda p: p.message_index)
    for before, after in zip(points, points[1:], strict=False):
        if after.message_index <= before.message_index:
            continue
        if any(before.message_index < b <= after.message_index for b in boundaries):
            continue
        actual = after.context_tokens - before.context_tokens
        if actual <= 0:
            continue
        steps.append(Growth(prefix[after.message_index] - prefix[before.message_index], actual))
    return steps


def totals(steps: Iterable[Growth]) -> tuple[int, int]:
    estimated = actual = 0
    for step in steps:
        estimated += step.estimated
        actual += step.actual
    return estimated, actual


def fit_factor(steps: Iterable[Growth]) -> float:
    """The factor that makes the calibrated total growth equal the recorded total growth."""
    estimated, actual = totals(steps)
    return actual / estimated if estimated else 1.0
