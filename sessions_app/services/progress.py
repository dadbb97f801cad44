"""Progress of long work (an import, the pruner) for whoever shows it: the CLI draws a bar with it.
Services take an optional ``on_progress(done, total)`` and stay free of any display."""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[int, int], None]


def ticker(on_progress: Progress | None, total: int) -> Callable[[int], None]:
    """``advance(n)``: n more of ``total`` done, reported to ``on_progress`` (which hears ``0`` at once)."""
    done = 0
    if on_progress is not None:
        on_progress(0, total)

    def advance(n: int = 1) -> None:
        nonlocal done
        done = min(total, done + n)
        if on_progress is not None and n:
            on_progress(done, total)

    return advance
