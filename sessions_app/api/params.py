"""Whole numbers from a query string: ASCII digits in a range, else a 400 that names the parameter."""

from __future__ import annotations

from typing import TypeVar

from rest_framework.request import Request

from compaction.numbers import whole_number
from sessions_app.errors import InvalidInput

_Default = TypeVar("_Default", int, None)


def int_param(request: Request, name: str, *, default: _Default, low: int, high: int | None = None) -> int | _Default:
    """``?name=`` as an integer from ``low`` to ``high``; ``default`` when absent or empty. Only ASCII
    digits count: "²", "٣", " 7", "+7" and "1_0" are refused like any other non-number."""
    raw = request.query_params.get(name)
    if not raw:
        return default
    value = whole_number(raw)
    if value is None or value < low or (high is not None and value > high):
        bounds = f"at least {low}" + (f" and at most {high}" if high is not None else "")
        raise InvalidInput(f"{name} must be a whole number, {bounds}.", code=f"invalid_{name}")
    return value
