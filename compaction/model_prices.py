"""Prices per kind of token and what a request's usage costs at them. Plain data: the catalogue
(``model_catalog``) fills them from the genai-prices package, the database's ModelProfile rows
override them field by field."""

from __future__ import annotations

from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

TOKEN_KINDS = ("input", "cache_write", "cache_read", "output")
PER_TOKENS = Decimal(1_000_000)  # prices are US dollars per million tokens


@dataclass(frozen=True)
class PriceTier:
    """From ``above`` input tokens in a request on (cache reads and writes included), every token of
    it costs these (providers' "long context" prices); a kind left None keeps its base price."""

    above: int
    input: Decimal | None = None
    cache_write: Decimal | None = None
    cache_read: Decimal | None = None
    output: Decimal | None = None


@dataclass(frozen=True)
class TokenPrices:
    input: Decimal | None = None
    cache_write: Decimal | None = None
    cache_read: Decimal | None = None
    output: Decimal | None = None
    tiers: tuple[PriceTier, ...] = ()

    def overridden(self, **prices: Decimal | None) -> TokenPrices:
        """These prices with the given kinds replaced (None leaves a kind as it is). A replaced kind
        is flat: an admin's price holds at any length of request."""
        given = {kind: value for kind, value in prices.items() if value is not None}
        if not given:
            return self
        cleared: dict[str, Any] = dict.fromkeys(given)
        tiers = tuple(replace(t, **cleared) for t in self.tiers)
        return replace(self, **given, tiers=tiers)

    def as_dict(self) -> dict[str, object]:
        def money(value: Decimal | None) -> str | None:
            return None if value is None else str(value)

        return {
            **{kind: money(getattr(self, kind)) for kind in TOKEN_KINDS},
            "tiers": [
                {"above": t.above, **{kind: money(getattr(t, kind)) for kind in TOKEN_KINDS}} for t in self.tiers
            ],
        }


@dataclass(frozen=True)
class TokenUsage:
    """A request's tokens by kind, as Anthropic reports them: ``input`` is what was read uncached."""

    input: int = 0
    cache_write: int = 0
    cache_read: int = 0
    output: int = 0

    @property
    def total_input(self) -> int:
        return self.input + self.cache_write + self.cache_read


def cost(prices: TokenPrices, used: TokenUsage) -> Decimal | None:
    """US dollars ``used`` costs at ``prices``; None when a kind it used has no price. A cache read or
    write without a price of its own costs the input price (a provider that doesn't bill them apart)."""
    tier = next((t for t in reversed(sorted(prices.tiers, key=lambda t: t.above)) if used.total_input > t.above), None)
    total = Decimal(0)
    for kind in TOKEN_KINDS:
        count = getattr(used, kind)
        if not count:
            continue
        rate = _rate(prices, tier, kind)
        if rate is None and kind.startswith("cache_"):
            rate = _rate(prices, tier, "input")
        if rate is None:
            return None
        total += Decimal(count) * rate
    return total / PER_TOKENS


def _rate(prices: TokenPrices, tier: PriceTier | None, kind: str) -> Decimal | None:
    above: Decimal | None = getattr(tier, kind) if tier is not None else None
    base: Decimal | None = getattr(prices, kind)
    return above if above is not None else base
