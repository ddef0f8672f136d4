"""Progress display for long work: shown on a terminal, silent otherwise or with ``--quiet``."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator

_quiet = False


def set_quiet(quiet: bool) -> None:
    """Silence (or re-enable) progress output for this process."""
    global _quiet
    _quiet = quiet


def enabled() -> bool:
    """True when progress should be drawn: stderr is a terminal and not quiet."""
    stream = sys.stderr
    if _quiet or stream is None:  # stderr is None under pythonw and some embedders
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


@contextlib.contextmanager
def progress(description: str, total: float | None = None) -> Iterator[Callable[[float], None]]:
    """Yield ``advance(n)``; draws a rich progress bar on stderr when :func:`enabled`."""
    if not enabled():
        yield lambda n=1: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                   TimeElapsedColumn(), console=Console(stderr=True), transient=True)
    with bar:
        task = bar.add_task(description, total=total)
        yield lambda n=1: bar.advance(task, n)
