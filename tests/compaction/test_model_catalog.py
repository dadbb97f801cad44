"""Windows and prices from the genai-prices package (issue 29): the 1M-token window when asked, input
caps smaller than the window, prices per kind of token with long-context tiers, and what a usage
costs at them. The package's snapshot is the bundled one: nothing is downloaded."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compaction import model_package
from compaction.model_catalog import LONG_CONTEXT_WINDOW, spec_for, without_long_context
from compaction.model_prices import PriceTier, TokenPrices, TokenUsage, cost


def window(name: str) -> int:
    spec = spec_for(name)
    assert spec is not None, name
    return spec.input_window


def test_a_1m_suffix_gives_the_1m_window_to_a_model_that_has_one():
    assert window("claude-opus-4-7[1m]") == LONG_CONTEXT_WINDOW
    assert window("claude-sonnet-4-5") == 200_000
    assert window("claude-sonnet-4-5[1m]") == LONG_CONTEXT_WINDOW  # priced past 200k: it takes more
    assert window("claude-sonnet-4-20250514[1m]") == LONG_CONTEXT_WINDOW  # the overlay knows it
    assert window("claude-haiku-4-5[1m]") == 200_000  # no 1M window to give
    assert without_long_context("claude-opus-4-7[1M]") == "claude-opus-4-7"


@pytest.mark.parametrize("name", ["gpt-5", "gpt-5-mini", "gpt-5.1-codex", "openai/gpt-5-2025-08-07"])
def test_gpt5_models_take_272k_input_of_their_400k_window(name):
    spec = spec_for(name)
    assert spec is not None
    assert (spec.context_window, spec.input_cap, spec.input_window) == (400_000, 272_000, 272_000)


def test_prices_per_kind_of_token_come_from_the_package():
    sonnet = spec_for("claude-sonnet-4-5-20250929")
    assert sonnet is not None and sonnet.prices is not None
    p = sonnet.prices
    assert (p.input, p.cache_write, p.cache_read, p.output) == tuple(map(Decimal, ("3", "3.75", "0.3", "15")))
    assert p.tiers == (PriceTier(200_000, *map(Decimal, ("6", "7.5", "0.6", "22.5"))),)
    gpt = spec_for("gpt-4o")
    assert gpt is not None and gpt.prices is not None
    assert (gpt.prices.input, gpt.prices.cache_write, gpt.prices.cache_read) == (Decimal("2.5"), None, Decimal("1.25"))


def test_the_package_is_its_bundled_snapshot_and_its_updater_never_runs():
    from genai_prices import data_snapshot, update_prices

    spec_for("claude-opus-4-7")
    assert data_snapshot.get_snapshot().from_auto_update is False
    assert update_prices._shared_updater.ref_count == 0  # nothing started it
    assert model_package.package_version() == "0.2.3"


def test_a_request_past_a_tier_pays_the_tier_price_for_every_token():
    prices = spec_for("claude-sonnet-4-5").prices
    assert prices is not None
    short = TokenUsage(input=1_000, cache_write=2_000, cache_read=10_000, output=500)
    expected = Decimal(1_000) * 3 + 2_000 * Decimal("3.75") + 10_000 * Decimal("0.3") + 500 * 15
    assert cost(prices, short) == expected / 10**6
    long = TokenUsage(input=1_000, cache_read=200_000, output=100)
    assert cost(prices, long) == (Decimal(1_000) * 6 + 200_000 * Decimal("0.6") + 100 * Decimal("22.5")) / 10**6


def test_a_kind_without_a_price_of_its_own():
    openai_like = TokenPrices(input=Decimal(2), output=Decimal(8))
    assert cost(openai_like, TokenUsage(input=1_000_000, cache_read=1_000_000)) == Decimal(4)  # at the input price
    assert cost(TokenPrices(input=Decimal(2)), TokenUsage(input=10, output=10)) is None  # no output price


def test_an_admins_price_is_flat_over_the_packages_tiers():
    tier = PriceTier(200_000, Decimal(6), output=Decimal(22))
    prices = TokenPrices(input=Decimal(3), output=Decimal(15), tiers=(tier,))
    mine = prices.overridden(input=Decimal(1), output=None)
    assert mine.input == Decimal(1) and mine.tiers[0].input is None and mine.tiers[0].output == Decimal(22)
    assert cost(mine, TokenUsage(input=300_000)) == Decimal("0.3")
    assert prices.overridden() is prices


counts = st.integers(min_value=0, max_value=10**9)
rates = st.decimals(min_value=0, max_value=1000, places=4)


@given(counts, counts, counts, counts, rates, rates, rates, rates)
def test_flat_prices_cost_each_kind_at_its_rate(i, w, r, o, pi, pw, pr, po):
    prices = TokenPrices(input=pi, cache_write=pw, cache_read=pr, output=po)
    expected = (i * pi + w * pw + r * pr + o * po) / Decimal(10**6)
    assert cost(prices, TokenUsage(i, w, r, o)) == expected
    halves = cost(prices, TokenUsage(i, w, 0, 0)), cost(prices, TokenUsage(0, 0, r, o))
    assert halves[0] is not None and halves[1] is not None and halves[0] + halves[1] == expected


@given(counts, counts, st.integers(min_value=1, max_value=10**6))
def test_a_tiered_cost_never_falls_as_input_grows(i, o, more):
    prices = spec_for("claude-sonnet-4-5").prices
    assert prices is not None
    less, extra = cost(prices, TokenUsage(input=i, output=o)), cost(prices, TokenUsage(input=i + more, output=o))
    assert less is not None and extra is not None and extra >= less


@given(st.text(max_size=60) | st.sampled_from(["claude-opus-4-7", "gpt-5", "o3", "claude-sonnet-4-5"]), st.booleans())
def test_any_model_name_resolves_to_a_usable_window_or_none(name, long_context):
    spec = spec_for(name + ("[1m]" if long_context else ""))
    if spec is not None:
        assert 0 < spec.input_window <= spec.context_window and spec.max_output_tokens > 0
        assert spec.prices is None or spec.prices.input is None or spec.prices.input >= 0
