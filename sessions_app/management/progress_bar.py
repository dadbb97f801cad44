"""The CLI's progress bars (``rich``), on stderr so ``--json`` output stays one object on stdout.
Drawn when stderr is a terminal (or with ``--progress``), never with ``--json`` or ``--no-progress``."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


def wanted(options: dict[str, Any], stream: TextIO | None = None) -> bool:
    if options.get("json") or options.get("progress") is False:
        return False
    return bool(options.get("progress")) or (stream or sys.stderr).isatty()


class Bars:
    """One line per phase: ``phase(label)`` starts one (a spinner until a total is known), and the
    callable it answers, ``(done, total)``, moves it — what the services' ``on_progress`` takes."""

    def __init__(self, progress: Progress | None) -> None:
        self.progress = progress

    def phase(self, label: str) -> Any:
        if self.progress is None:
            return None
        task = self.progress.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            assert self.progress is not None
            self.progress.update(task, completed=done, total=total)

        return update


@contextmanager
def bars(enabled: bool, stream: TextIO | None = None) -> Iterator[Bars]:
    if not enabled:
        yield Bars(None)
        return
    console = Console(file=stream or sys.stderr)
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console) as progress:
        yield Bars(progress)
