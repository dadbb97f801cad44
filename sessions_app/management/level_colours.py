"""The CLI's levels in colour on a terminal: ok green, remind and compact yellow, summarize and
handoff red. Plain text when stdout is not a terminal, when ``NO_COLOR`` is set to anything but
the empty string (no-color.org) or with Django's ``--no-color``; ``--force-color`` colours anyway."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

# ANSI SGR codes: the terminal's own palette, so the user's theme decides the exact shades.
COLOURS = {"ok": "32", "remind": "33", "compact": "33", "summarize": "31", "handoff": "1;31"}


def colour_wanted(options: dict[str, Any], stream: Any) -> bool:
    if options.get("no_color"):
        return False
    if options.get("force_color"):
        return True
    return not os.environ.get("NO_COLOR") and stream.isatty()


def level_painter(enabled: bool) -> Callable[[str], str]:
    """What dresses a level's name: its colour, or nothing."""

    def paint(level: str) -> str:
        code = COLOURS.get(level) if enabled else None
        return f"\x1b[{code}m{level}\x1b[0m" if code else level

    return paint
