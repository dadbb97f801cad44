"""Measuring the offline estimate against what Claude actually counted.

Every assistant line of a Claude Code transcript records the API's ``usage``; the context the model
saw is ``input + cache_creation + cache_read`` tokens. Between two consecutive requests the context
grows by exactly the messages in between (the assistant's reply, the tool results, the next
prompt), so comparing that growth with our estimate of those messages measures the estimator on
real traffic, without needing the hidden system prompt or tool definitions.

The estimate of a step is linear in its features — cl100k tokens of the content, the number of
messages, and the number of content blocks of each kind — so the framing constants and the
calibration factor can be fitted (and cross-validated) with arithmetic alone, tokenizing each
transcript once; ``Features.estimate`` equals what ``OfflineTokenizer`` counts for the same messages.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .tokens import Framing, OfflineTokenizer
from .transcripts import Conversation

# Framing with nothing but the content: the features are measured with it, framing added later.
_CONTENT_ONLY = OfflineTokenizer(Framing(request=0, message=0, block=0, tool_use=0, tool_result=0, tool_definition=0))


@dataclass(frozen=True)
class Features:
    """What the estimate of some messages is made of; summed over steps and files by ``+``."""

    content: int = 0  # cl100k tokens of text, tool inputs and results, without framing
    messages: int = 0
    blocks: int = 0  # content blocks other than tool_use / tool_result (a plain-string message has none)
    tool_uses: int = 0
    tool_results: int = 0

    def __add__(self, other: Features) -> Features:
        return Features(
            self.content + other.content,
            self.messages + other.messages,
            self.blocks + other.blocks,
            self.tool_uses + other.tool_uses,
            self.tool_results + other.tool_results,
        )

    def estimate(self, framing: Framing, factor: float = 1.0) -> float:
        framed = (
            self.content
            + framing.message * self.messages
            + framing.block * self.blocks
            + framing.tool_use * self.tool_uses
            + framing.tool_result * self.tool_results
        )
        return factor * framed


def message_features(message: dict[str, Any]) -> Features:
    content = message["content"]
    kinds = [b.get("type") for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    tool_uses, tool_results = kinds.count("tool_use"), kinds.count("tool_result")
    return Features(
        _CONTENT_ONLY.count_message(message["role"], content),
        1,
        len(kinds) - tool_uses - tool_results,
        tool_uses,
        tool_results,
    )


@dataclass(frozen=True)
class Step:
    """The messages between two recorded requests, and the growth Claude counted for them."""

    features: Features
    actual: int


def growth_steps(conversation: Conversation) -> list[Step]:
    """Consecutive request pairs inside one segment (no compaction boundary between them) whose
    context grew; a rewind or a compaction makes the context shrink and says nothing about counting."""
    features = [message_features(m) for m in conversation.messages]
    boundaries = sorted(conversation.segment_starts)
    points = sorted(conversation.usage_points, key=lambda p: p.message_index)
    steps: list[Step] = []
    for before, after in itertools.pairwise(points):
        if after.message_index <= before.message_index:
            continue
        if any(before.message_index < b <= after.message_index for b in boundaries):
            continue
        actual = after.context_tokens - before.context_tokens
        if actual <= 0:
            continue
        steps.append(Step(sum(features[before.message_index : after.message_index], Features()), actual))
    return steps


@dataclass(frozen=True)
class Sample:
    """All steps of one transcript file, summed: the unit the estimator is judged on."""

    name: str
    features: Features
    actual: int

    @classmethod
    def of(cls, name: str, steps: Iterable[Step]) -> Sample:
        steps = list(steps)
        return cls(name, sum((s.features for s in steps), Features()), sum(s.actual for s in steps))

    def estimate(self, framing: Framing, factor: float = 1.0) -> float:
        return self.features.estimate(framing, factor)

    def error(self, framing: Framing, factor: float) -> float:
        """Relative error of the estimated growth: +0.05 means 5 % too many tokens."""
        return self.estimate(framing, factor) / self.actual - 1


def fit_factor(samples: Sequence[Sample], framing: Framing) -> float:
    """The factor that makes the estimated total growth equal the recorded total growth."""
    estimated = sum(s.estimate(framing) for s in samples)
    actual = sum(s.actual for s in samples)
    return actual / estimated if estimated else 1.0


def total_error(samples: Sequence[Sample], framing: Framing, factor: float) -> float:
    actual = sum(s.actual for s in samples)
    return sum(s.estimate(framing, factor) for s in samples) / actual - 1 if actual else 0.0


def _mean_square_error(samples: Sequence[Sample], framing: Framing, factor: float) -> float:
    return sum(s.error(framing, factor) ** 2 for s in samples) / len(samples)


def fit_framing(
    samples: Sequence[Sample],
    base: Framing,
    *,
    messages: Iterable[int] = range(0, 41),
    blocks: Iterable[int] = range(0, 41),
) -> tuple[Framing, float]:
    """Grid search for the per-message and per-block framing that, with the factor fitted so the
    total is exact, gives the smallest per-file error — so one big file can't set the constants alone."""
    best: tuple[float, Framing, float] | None = None
    block_options = list(blocks)
    for m in messages:
        for b in block_options:
            framing = replace(base, message=m, block=b, tool_use=b, tool_result=b)
            factor = fit_factor(samples, framing)
            score = _mean_square_error(samples, framing, factor)
            if best is None or score < best[0]:
                best = (score, framing, factor)
    assert best is not None, "fit_framing needs at least one candidate"
    return best[1], best[2]


def leave_one_out(samples: Sequence[Sample], framing: Framing) -> list[tuple[Sample, float]]:
    """Each file's error with the factor fitted on all the other files: how the estimator does on a
    transcript it has never seen."""
    out = []
    for i, held_out in enumerate(samples):
        rest = [s for j, s in enumerate(samples) if j != i]
        out.append((held_out, held_out.error(framing, fit_factor(rest, framing))))
    return out
