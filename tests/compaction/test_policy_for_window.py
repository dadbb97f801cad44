"""Thresholds in tokens as well as fractions: ``Policy.for_window`` resolves them against a window,
and ``validate`` checks them (docs/POLICIES.md, "Thresholds: fractions or tokens")."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from compaction.policy import PRESETS, THRESHOLD_NAMES, TOKEN_FIELDS, Policy, validate
from compaction.types import Level
from compaction.usage import compute_usage
from tests.hypothesis_budget import ENGINE


def levels_of(policy: Policy) -> tuple[float, float, float, float]:
    return (policy.remind, policy.compact, policy.summarize, policy.handoff)


def test_without_tokens_the_policy_is_returned_unchanged():
    policy = PRESETS["default"]
    assert policy.for_window(200_000) is policy


def test_gsd_compacts_at_90k_on_a_large_window_and_at_its_fraction_on_its_own_and_smaller():
    gsd = PRESETS["gsd"]
    assert (gsd.compact_tokens, gsd.summarize_tokens) == (90_000, 90_000)
    on_100k = gsd.for_window(100_000)
    assert levels_of(on_100k) == (0.90, 0.90, 0.90, 1.0) and on_100k.target_after == gsd.target_after
    on_200k = gsd.for_window(200_000)
    # The remind fraction (90 %) comes down to the 90k trigger; the target goes below it.
    assert levels_of(on_200k) == (0.45, 0.45, 0.45, 1.0)
    assert on_200k.target_after == pytest.approx(0.25) and on_200k.tail_fraction < on_200k.summarize
    # 90k is more than a 32k window holds: the fractions stay.
    assert levels_of(gsd.for_window(32_000)) == (0.90, 0.90, 0.90, 1.0)
    assert levels_of(gsd.for_window(90_000)) == (0.90, 0.90, 0.90, 1.0)  # at the window: the fraction too


def test_a_usage_reaches_compact_at_the_token_threshold():
    gsd = PRESETS["gsd"]

    def level(used: int, window: int) -> Level:
        fields = {"system_prompt": 0, "tool_definitions": 0, "summary": 0}
        return compute_usage(model="m", context_window=window, messages=used, policy=gsd, **fields).level

    assert level(89_999, 200_000) == Level.OK
    assert level(90_000, 200_000) == Level.SUMMARIZE  # compact and summarize coincide, as the fractions do
    assert level(28_000, 32_000) == Level.OK and level(28_800, 32_000) == Level.SUMMARIZE


def test_resolving_spends_the_token_fields_so_it_is_idempotent_whatever_the_window():
    resolved = PRESETS["gsd"].for_window(200_000)
    assert all(getattr(resolved, name) is None for name in TOKEN_FIELDS.values())
    assert resolved.for_window(200_000) == resolved
    assert resolved.for_window(32_000) == resolved


def test_a_target_in_tokens_and_a_target_left_above_the_trigger():
    policy = Policy(compact_tokens=60_000, target_after_tokens=30_000)
    assert (policy.for_window(200_000).compact, policy.for_window(200_000).target_after) == (0.30, 0.15)
    tiny_trigger = Policy(compact_tokens=1_000).for_window(10_000_000)
    assert 0 < tiny_trigger.target_after < tiny_trigger.compact  # max(0.05, compact - 0.20) would not be


VALID = Policy().as_dict()


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"compact_tokens": 500}, "compact_tokens"),
        ({"compact_tokens": 10_000_001}, "compact_tokens"),
        ({"compact_tokens": 90_000.0}, "compact_tokens"),
        ({"compact_tokens": "90000"}, "compact_tokens"),
        ({"compact_tokens": True}, "compact_tokens"),
        ({"remind_tokens": 100_000, "summarize_tokens": 90_000}, "summarize_tokens"),
        ({"compact_tokens": 90_000, "handoff_tokens": 80_000}, "handoff_tokens"),
        ({"compact_tokens": 90_000, "target_after_tokens": 90_000}, "target_after_tokens"),
    ],
)
def test_validate_refuses_bad_token_thresholds_on_their_field(changes, field):
    assert field in validate(VALID | changes)


def test_validate_accepts_token_thresholds_unset_or_in_range_and_ascending():
    assert validate(VALID | dict.fromkeys(TOKEN_FIELDS.values())) == {}
    ascending = {"remind_tokens": 1_000, "compact_tokens": 90_000, "handoff_tokens": 10_000_000}
    assert validate(VALID | ascending | {"target_after_tokens": 89_999}) == {}
    assert validate(VALID | {"target_after_tokens": 500_000}) == {}  # no compact_tokens to be below


@st.composite
def valid_policies(draw: st.DrawFn) -> Policy:
    """Any policy ``validate`` accepts, with any of the thresholds also in tokens."""
    fractions = sorted(draw(st.lists(st.floats(0.01, 1.0), min_size=4, max_size=4)))
    target = draw(st.floats(0.001, 0.999).filter(lambda t: t < fractions[1]))
    tail = draw(st.floats(0.001, 0.999).filter(lambda t: t < fractions[2]))
    tokens = sorted(draw(st.lists(st.integers(1_000, 10_000_000), min_size=4, max_size=4)))
    which = draw(st.lists(st.booleans(), min_size=4, max_size=4))
    given_tokens = {
        f"{name}_tokens": n if on else None for name, n, on in zip(THRESHOLD_NAMES, tokens, which, strict=True)
    }
    target_tokens = draw(st.none() | st.integers(1_000, 10_000_000))
    compact_tokens = given_tokens["compact_tokens"]
    if target_tokens is not None and compact_tokens is not None:
        assume(target_tokens < compact_tokens)
    policy = Policy.from_mapping(
        {
            **dict(zip(THRESHOLD_NAMES, fractions, strict=True)),
            **given_tokens,
            "target_after": target,
            "target_after_tokens": target_tokens,
            "tail_fraction": tail,
        }
    )
    assume(validate(policy.as_dict()) == {})
    return policy


@ENGINE
@given(valid_policies(), st.integers(1_000, 20_000_000))
def test_property_a_resolved_policy_is_valid_ordered_and_holds_its_token_thresholds(policy, window):
    resolved = policy.for_window(window)
    assert validate(resolved.as_dict()) == {}
    assert all(low <= high for low, high in pairwise(levels_of(resolved)))
    assert 0 < resolved.target_after < resolved.compact
    for name in THRESHOLD_NAMES:
        tokens = getattr(policy, f"{name}_tokens")
        if tokens is not None and tokens < window:
            # Valid token thresholds are in order, so each set one below the window holds exactly.
            assert getattr(resolved, name) == tokens / window, name
    assert resolved.for_window(window) == resolved


@ENGINE
@given(valid_policies(), st.integers(1_000, 20_000_000))
def test_property_fractions_without_tokens_on_either_side_stay_as_set(policy, window):
    resolved = policy.for_window(window)
    held = [name for name in THRESHOLD_NAMES if (getattr(policy, f"{name}_tokens") or window) < window]
    if not held:
        assert levels_of(resolved) == levels_of(policy)
        if policy.target_after_tokens is None or policy.target_after_tokens >= window:
            assert resolved.target_after == policy.target_after
    else:
        lowest, highest = held[0], held[-1]
        # Fractions below the lowest held threshold and above the highest only move toward it.
        for name in THRESHOLD_NAMES[: THRESHOLD_NAMES.index(lowest)]:
            assert getattr(resolved, name) == min(getattr(policy, name), getattr(resolved, lowest))
        for name in THRESHOLD_NAMES[THRESHOLD_NAMES.index(highest) + 1 :]:
            assert getattr(resolved, name) == max(getattr(policy, name), getattr(resolved, highest))
