"""STATUS has one typed definition (compaction.status.Status), shared by the server and ctxclient."""

from __future__ import annotations

from dataclasses import fields
from typing import get_args

import ctxclient
from compaction.status import LevelName, Status, ThresholdFractions, ThresholdTokens, TokenSource
from compaction.types import Level, Thresholds


def test_status_names_every_key_of_the_contract():
    assert list(Status.__annotations__) == [
        "model",
        "context_window",
        "system_prompt",
        "tool_definitions",
        "messages",
        "summary",
        "reserved_output",
        "used",
        "free",
        "usage_percent",
        "level",
        "thresholds",
        "threshold_tokens",
        "will_compact",
        "compacted",
        "compacted_in_this_step",
        "can_continue",
        "continued_in",
        "recommendation",
        "token_source",
        "cached",
        "counted_at",
        "expected_error",
        "warnings",
        "auto_compact",
        "auto_paused",
        "message_count",
        "active_messages",
        "last_seq",
        "calibration_factor",
    ]
    assert Status.__required_keys__ == frozenset(Status.__annotations__)


def test_its_literals_follow_the_engine():
    assert get_args(LevelName) == tuple(level.value for level in Level)
    assert get_args(TokenSource) == ("exact", "estimate")
    assert list(ThresholdFractions.__annotations__) == [f.name for f in fields(Thresholds)]
    assert Thresholds(0.6, 0.7, 0.85, 0.95).as_dict() == {
        "remind": 0.6,
        "compact": 0.7,
        "summarize": 0.85,
        "handoff": 0.95,
    }
    assert list(ThresholdTokens.__annotations__) == list(ThresholdFractions.__annotations__)


def test_threshold_tokens_are_the_least_used_at_each_level():
    # 0.55 × 200,000 is 110,000.000…01 in floating point (7,000 ÷ 200,000 × 200,000 likewise): still
    # the whole number, not the next token.
    assert Thresholds(7_000 / 200_000, 0.45, 0.55, 1.0).tokens(200_000) == {
        "remind": 7_000,
        "compact": 90_000,
        "summarize": 110_000,
        "handoff": 200_000,
    }
    # A fraction that falls between two tokens: the level starts at the next whole one.
    assert Thresholds(0.6, 0.7, 0.85, 0.95).tokens(1_001)["remind"] == 601


def test_the_client_uses_it():
    assert ctxclient.Status is Status
