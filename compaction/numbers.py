"""Whole numbers read from text someone else wrote: a todo id, a query parameter, an exit code.

``str.isdigit`` holds for "²" and "①", which ``int()`` refuses; ``int()`` itself reads "٣", " 7",
"+3" and "1_0", and raises on more than 4,300 digits. A number here is ASCII digits and nothing else.
"""

from __future__ import annotations

from typing import Any

MAX_DIGITS = 18  # every such number fits a signed 64-bit integer (a bigint column, a pk)


def whole_number(text: Any, *, max_digits: int = MAX_DIGITS) -> int | None:
    """``text`` as a non-negative integer when it is a string of 1 to ``max_digits`` ASCII digits,
    else None."""
    if not isinstance(text, str) or not 0 < len(text) <= max_digits:
        return None
    if not (text.isascii() and text.isdigit()):
        return None
    return int(text)
