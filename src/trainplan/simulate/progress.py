"""A rich progress bar on stderr for long loops (simulation grids, bootstrap refits).

Shown only when stderr is a terminal, so piped output and tests stay clean; `show` forces it
on or off. Used as `with progress_bar("bootstrap", 200) as advance: ... advance(1)`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def progress_bar(label: str, total: int, show: bool | None = None) -> Iterator[Callable[[int], None]]:
    """Yield `advance(n)`; a transient bar of `total` steps on stderr while the block runs."""
    if show is None:
        show = sys.stderr.isatty()
    if not show or total <= 0:
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
        TimeRemainingColumn

    with Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TimeRemainingColumn(), console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n: bar.advance(task, n)
