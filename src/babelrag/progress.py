"""Progress bars for long work (indexing, benchmarks), on stderr so stdout stays machine-readable."""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

_console = Console(stderr=True)


@contextmanager
def progress(description: str, total: int) -> Iterator[Callable[[int], None]]:
    """Yield ``advance(n)``; silent when ``BABELRAG_PROGRESS=0``."""
    if os.environ.get("BABELRAG_PROGRESS", "1") == "0":
        yield lambda n: None
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=_console, transient=False) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)
