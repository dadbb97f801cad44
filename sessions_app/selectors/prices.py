"""What tokens cost, and the models ctxweb knows: ``price_of`` is the one place a model's usage
becomes dollars (the dashboard's cost, the spend per request), at the prices ``usage.model_info``
resolves (an admin's ModelProfile row, field by field, over the genai-prices package)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from compaction import model_catalog, model_package
from compaction.model_prices import TokenUsage, cost
from sessions_app.models import ModelProfile
from sessions_app.selectors.usage import model_info

# The providers whose models ``GET /models/`` lists from the package (the ones ctxweb proxies).
LISTED_PROVIDERS = ("anthropic", "openai")


def price_of(model: str, used: TokenUsage, *, at: datetime | None = None) -> Decimal | None:
    """What ``used`` cost on ``model`` in US dollars, at the prices of ``at``'s UTC day (today when
    None); None when the model has no price for a kind of token it used (an unknown model, a price
    nobody set)."""
    prices = model_info(model, on=at.astimezone(UTC).date() if at is not None else None).prices
    return None if prices is None else cost(prices, used)


def model_list() -> list[dict[str, Any]]:
    """Every model of the listed providers the package knows with a window, and every ModelProfile
    row, each with the figures a session of it is worked out with (a row's own over the package's)."""
    names = {row: provider for row, provider in ModelProfile.objects.values_list("name", "provider")}
    for package in model_package.package_models(LISTED_PROVIDERS):
        names.setdefault(package.name, package.provider)
    rows = []
    for name, provider in names.items():
        info = model_info(name)
        spec = model_catalog.spec_for(name)
        rows.append(
            {
                "name": name,
                "provider": spec.provider if spec else provider,
                "context_window": info.context_window,
                "max_output_tokens": info.max_output_tokens,
                "calibration_factor": info.calibration,
                "long_context_window": _long_window(name),
                "prices": info.prices.as_dict() if info.prices else None,
            }
        )
    return sorted(rows, key=lambda r: (r["provider"], r["name"]))


def _long_window(name: str) -> int | None:
    """The window the model takes when asked for its 1M-token one (``…[1m]``), when larger than its own."""
    plain = model_catalog.spec_for(name)
    asked = model_catalog.spec_for(name + model_catalog.LONG_CONTEXT_SUFFIX)
    if plain is None or asked is None or asked.input_window <= plain.input_window:
        return None
    return asked.input_window
