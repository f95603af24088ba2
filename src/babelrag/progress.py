"""Progress bars for long work (indexing, benchmarks), on stderr so stdout stays machine-readable."""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)
from rich.text import Text

_console = Console(stderr=True)


class _Rate(ProgressColumn):
    """Items per second (questions/s in evaluation), from rich's own moving estimate."""

    def __init__(self, unit: str):
        super().__init__()
        self.unit = unit

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:.2f} {self.unit}/s" if speed else f"– {self.unit}/s", style="progress.data.speed")


@contextmanager
def progress(description: str, total: int, unit: str = "items") -> Iterator[Callable[[int], None]]:
    """Yield ``advance(n)``; the bar shows the rate in ``unit``/s and the ETA; silent when
    ``BABELRAG_PROGRESS=0``."""
    if os.environ.get("BABELRAG_PROGRESS", "1") == "0":
        yield lambda n: None
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), _Rate(unit),
               TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=_console, transient=False) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)
