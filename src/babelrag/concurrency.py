"""Work on several items at once, results in input order: evaluation, the analyses, a question's
search paths and its per-passage model calls share it, so concurrent work records what a sequential
run would. Each task runs in a copy of the caller's context (a request's deadline holds in threads)."""
from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

from babelrag import deadline
from babelrag.deadline import Budget
from babelrag.types import Trace

Item = TypeVar("Item")
Result = TypeVar("Result")


@contextmanager
def in_order(work: Callable[[Item], Result], items: Iterable[Item], concurrency: int) -> Iterator[Iterator[Result]]:
    """``work(item)`` for each item, ``concurrency`` at a time, its results in the items' order:
    ``with in_order(...) as results: for result in results: ...``. Leaving early (an exception in
    the work or in the caller, an abort, Ctrl-C) cancels what has not started, ends the deadline of
    what has (its next model call stops) and waits for it, so nothing runs on behind the caller."""
    if concurrency <= 1:
        yield map(work, items)
        return
    budget = Budget(within=deadline.current())
    pool = ThreadPoolExecutor(concurrency, thread_name_prefix="in-order")

    def bounded(item: Item) -> Result:
        with deadline.limit(budget):
            deadline.check("the next item")  # queued work whose deadline passed never starts
            return work(item)

    futures = [pool.submit(contextvars.copy_context().run, bounded, item) for item in items]
    finished = False
    try:
        yield (future.result() for future in futures)
        finished = True
    finally:
        if not finished:
            budget.cancel()
        pool.shutdown(wait=True, cancel_futures=True)


def traced_in_order(work: Callable[[Item, Trace], Result], items: Sequence[Item], trace: Trace,
                    concurrency: int) -> list[Result]:
    """Like ``in_order``, each item recording into a trace of its own, appended to ``trace`` in item
    order: the trace reads as a sequential run's whatever finished first."""
    def one(item: Item) -> tuple[Result, Trace]:
        own = Trace()
        return work(item, own), own

    results = []
    with in_order(one, items, min(concurrency, len(items))) as done:
        for result, own in done:
            trace.extend(own)
            results.append(result)
    return results
