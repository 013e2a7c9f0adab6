"""Progress on stderr for jobs that can run past a few seconds (probes, fits, simulations, sweeps).

    with progress("decode probe"):                 # a spinner and the time elapsed
        d = run_decode(...)
    with progress("probing", total=5) as steps:    # a bar of 5 steps
        steps.describe("probe read"); ...; steps.advance()

Shown only when stderr is a terminal, so piped output, JSON and tests stay clean (`show` forces it
on or off), and only the outermost one: a progress inside another (a probe run by `probe all`)
stays quiet rather than fight it for the terminal. Transient: the line goes when the job ends, so
what is left on the screen is the answer.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_showing = 0  # progress displays open now (nested ones stay quiet)


class Steps:
    """What a `progress` block can do: move its bar on and say what it is doing now."""

    def __init__(self, bar: Any = None, task: Any = None) -> None:
        self._bar, self._task = bar, task

    def advance(self, n: float = 1) -> None:
        if self._bar is not None:
            self._bar.advance(self._task, n)

    def describe(self, text: str) -> None:
        if self._bar is not None:
            self._bar.update(self._task, description=text)


def showing() -> bool:
    """Whether a progress display is on the terminal now."""
    return _showing > 0


@contextmanager
def progress(label: str, total: float | None = None, *, show: bool | None = None,
             console: Any = None) -> Iterator[Steps]:
    """A transient progress display on stderr while the block runs: a bar of `total` steps, or a
    spinner with the time elapsed when the length is unknown. Quiet (a Steps that does nothing)
    when stderr is not a terminal, when `show` is False, or inside another progress."""
    global _showing
    if show is None:
        show = console.is_terminal if console is not None else sys.stderr.isatty()
    if not show or _showing:
        yield Steps()
        return
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                               TimeElapsedColumn)

    columns: list[Any] = [SpinnerColumn(), TextColumn("{task.description}")]
    if total is not None:
        columns += [BarColumn(), MofNCompleteColumn()]
    columns.append(TimeElapsedColumn())
    _showing += 1
    try:
        with Progress(*columns, console=console or Console(stderr=True), transient=True) as bar:
            yield Steps(bar, bar.add_task(label, total=total))
    finally:
        _showing -= 1


@contextmanager
def progress_bar(label: str, total: int, show: bool | None = None) -> Iterator[Callable[[int], None]]:
    """`with progress_bar(label, total) as advance: ... advance(1)`: the same display, yielding only
    the advance function (the form the simulation and bootstrap loops use)."""
    with progress(label, total=total if total > 0 else None, show=show) as steps:
        yield steps.advance
