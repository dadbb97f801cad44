"""Value types shared by the engine. Dataclasses in, dataclasses out."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from .status import ThresholdFractions, ThresholdTokens


class Level(str, Enum):
    OK = "ok"
    REMIND = "remind"
    COMPACT = "compact"
    SUMMARIZE = "summarize"
    HANDOFF = "handoff"

    @property
    def rank(self) -> int:
        return LEVEL_ORDER.index(self)

    @property
    def label(self) -> str:
        return self.value.capitalize()

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, Level):
            return NotImplemented
        return self.rank >= other.rank

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, Level):
            return NotImplemented
        return self.rank > other.rank

    def __le__(self, other: object) -> bool:
        if not isinstance(other, Level):
            return NotImplemented
        return self.rank <= other.rank

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Level):
            return NotImplemented
        return self.rank < other.rank


LEVEL_ORDER: tuple[Level, ...] = (Level.OK, Level.REMIND, Level.COMPACT, Level.SUMMARIZE, Level.HANDOFF)
# The levels a compaction runs at; ok and remind only inform.
COMPACTION_LEVELS: tuple[Level, ...] = (Level.COMPACT, Level.SUMMARIZE, Level.HANDOFF)


def level_choices(levels: Iterable[Level] = COMPACTION_LEVELS) -> list[tuple[str, str]]:
    """``(value, label)`` pairs: the ``choices`` of a Django model or form field that holds a level."""
    return [(level.value, level.label) for level in levels]


ROLES = ("user", "assistant", "tool", "system")


@dataclass(frozen=True)
class Thresholds:
    """Fractions of the context window at which each level starts."""

    remind: float
    compact: float
    summarize: float
    handoff: float

    def as_dict(self) -> ThresholdFractions:
        return {"remind": self.remind, "compact": self.compact, "summarize": self.summarize, "handoff": self.handoff}

    def tokens(self, context_window: int) -> ThresholdTokens:
        """Each threshold as the least whole ``used`` that reaches it on this window (rounded to a
        millionth first, so 0.55 × 200,000 is 110,000 and not the next token up)."""

        def least(fraction: float) -> int:
            return math.ceil(round(fraction * context_window, 6))

        return {
            "remind": least(self.remind),
            "compact": least(self.compact),
            "summarize": least(self.summarize),
            "handoff": least(self.handoff),
        }


@dataclass
class Msg:
    """One stored message as the engine sees it."""

    seq: int
    role: str
    content: str | list[dict[str, Any]]
    tokens: int
    state: str = "active"
    created_at: str | None = None
    flags: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Usage:
    """The context-window breakdown of one session (the STATUS of the contract)."""

    model: str
    context_window: int
    system_prompt: int
    tool_definitions: int
    messages: int
    summary: int
    reserved_output: int
    level: Level
    thresholds: Thresholds

    @property
    def used(self) -> int:
        return self.system_prompt + self.tool_definitions + self.messages + self.summary

    @property
    def free(self) -> int:
        return self.context_window - self.used - self.reserved_output

    @property
    def fraction(self) -> float:
        return self.used / self.context_window if self.context_window else 1.0

    @property
    def usage_percent(self) -> float:
        return round(self.fraction * 100, 2)
