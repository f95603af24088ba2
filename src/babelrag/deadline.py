"""A deadline for the work of one request, checked between model calls and write batches.

The service sets it around each request's work (``limit``); long stages call ``check`` before each
model call or batch, so work past its deadline stops instead of running on after the client was told
it timed out. Outside a service there is no deadline and ``check`` costs a context-variable read.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from babelrag.errors import BabelragError

class Budget:
    """A deadline that can also be called off early: a reader who stopped listening (``cancel``)."""

    def __init__(self, seconds: float | None = None):
        self.ends = None if seconds is None else time.monotonic() + seconds

    def cancel(self) -> None:
        self.ends = time.monotonic()


_deadline: ContextVar[Budget | None] = ContextVar("babelrag_deadline", default=None)


class DeadlineExceeded(BabelragError):
    """The request's time ran out; the work stopped (nothing half-written stays)."""


@contextmanager
def limit(seconds: float | Budget) -> Iterator[Budget]:
    budget = seconds if isinstance(seconds, Budget) else Budget(seconds)
    token = _deadline.set(budget)
    try:
        yield budget
    finally:
        _deadline.reset(token)


def remaining() -> float | None:
    """Seconds left, or None without a deadline."""
    budget = _deadline.get()
    return None if budget is None or budget.ends is None else budget.ends - time.monotonic()


def check(what: str) -> None:
    left = remaining()
    if left is not None and left <= 0:
        raise DeadlineExceeded(f"the request's deadline passed before {what}")
