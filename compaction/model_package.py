"""What the genai-prices package knows of a model: its window and its prices per kind of token, read
from the snapshot bundled in the installed package. Its background updater (``UpdatePrices``) is
never started: nothing here reaches the network, and the figures change when the pinned version does."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from decimal import Decimal
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from compaction.model_prices import PriceTier, TokenPrices

if TYPE_CHECKING:
    from genai_prices import types as gp

# genai_prices is imported where it is used: it and its snapshot take a quarter of a second to load,
# which a process that never looks a model up (a CLI command, a worker's first task) does not pay.

# The package's price keys for the kinds of token ctxweb prices.
_KEYS = {
    "input": "input_mtok",
    "cache_write": "cache_write_mtok",
    "cache_read": "cache_read_mtok",
    "output": "output_mtok",
}
# A long-context price from this many input tokens on or fewer means the model takes more than its
# standard window when asked (Anthropic's 1M-token beta is priced from 200,000 on).
LONG_CONTEXT_PRICED_FROM = 200_000


@dataclass(frozen=True)
class PackageModel:
    name: str  # the package's id
    provider: str
    context_window: int | None
    prices: TokenPrices | None
    long_context: bool  # takes a 1M-token window when asked


def package_version() -> str:
    from genai_prices import __version__

    return __version__


@lru_cache(maxsize=1024)
def package_model(bare: str) -> PackageModel | None:
    """The package's model for a canonical name (its own matching: dated versions, aliases), or None."""
    from genai_prices import data_snapshot

    snapshot = data_snapshot.get_snapshot()
    try:
        provider, model = snapshot.find_provider_model(bare, None, None, None)
    except LookupError:
        return None
    prices = _prices(model)
    window = model.context_window
    tiered = prices is not None and any(t.above <= LONG_CONTEXT_PRICED_FROM for t in prices.tiers)
    return PackageModel(
        name=model.id,
        provider=provider.id,
        context_window=window,
        prices=prices,
        long_context=tiered or (window or 0) >= 1_000_000,
    )


@lru_cache(maxsize=4096)
def package_prices_on(bare: str, day: date) -> TokenPrices | None:
    """The package's prices of a model (canonical name) on a UTC day: a model whose price changed has
    one set before the change and another after; None for a model the package doesn't know."""
    from genai_prices import data_snapshot

    try:
        _, model = data_snapshot.get_snapshot().find_provider_model(bare, None, None, None)
    except LookupError:
        return None
    return _prices(model, datetime.combine(day, time(12), tzinfo=UTC))


def _prices(model: gp.ModelInfo, at: datetime | None = None) -> TokenPrices | None:
    """The model's standard prices at ``at`` (today by default; not a service tier's or a batch's)."""
    from genai_prices import types as gp

    standard = model.get_prices(at or datetime.now(tz=UTC))
    values = {kind: getattr(standard, key, None) for kind, key in _KEYS.items()}
    if values["input"] is None and values["output"] is None:
        return None
    bases = {kind: _base(value) for kind, value in values.items()}
    starts = sorted({t.start for v in values.values() if isinstance(v, gp.TieredPrices) for t in v.tiers})
    tiers = tuple(
        PriceTier(above=start, **{kind: _at(value, start) for kind, value in values.items()}) for start in starts
    )
    return TokenPrices(**bases, tiers=tiers)


def _base(value: Any) -> Decimal | None:
    from genai_prices import types as gp

    if isinstance(value, gp.TieredPrices):
        return value.base
    return value if isinstance(value, Decimal) else None


def _at(value: Any, start: int) -> Decimal | None:
    """A kind's price from ``start`` input tokens on: the highest of its tiers that starts there or before."""
    from genai_prices import types as gp

    if not isinstance(value, gp.TieredPrices):
        return None
    reached = [t for t in value.tiers if t.start <= start]
    return max(reached, key=lambda t: t.start).price if reached else None


def package_models(providers: tuple[str, ...]) -> list[PackageModel]:
    """The package's current models of ``providers`` that have a window (a chat model, not an image
    or audio one), as ``package_model`` reads them."""
    from genai_prices import data_snapshot

    found = []
    for provider in data_snapshot.get_snapshot().providers:
        if provider.id not in providers:
            continue
        for model in provider.models:
            if model.context_window and not model.deprecated:
                known = package_model(model.id)
                if known is not None and known.name == model.id:
                    found.append(known)
    return found
