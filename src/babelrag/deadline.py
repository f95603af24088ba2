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
    """A deadline that can also be called off early: a reader who stopped listening (``cancel``). A
    budget inside another (``within``) ends when either does."""

    def __init__(self, seconds: float | None = None, within: Budget | None = None):
        self.ends = None if seconds is None else time.monotonic() + seconds
        self.within = within

    def cancel(self) -> None:
        self.ends = time.monotonic()

    def left(self) -> float | None:
        own = None if self.ends is None else self.ends - time.monotonic()
        outer = self.within.left() if self.within is not None else None
        return own if outer is None else outer if own is None else min(own, outer)


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


def current() -> Budget | None:
    return _deadline.get()


def remaining() -> float | None:
    """Seconds left, or None without a deadline."""
    budget = _deadline.get()
    return None if budget is None else budget.left()


def check(what: str) -> None:
    left = remaining()
    if left is not None and left <= 0:
        raise DeadlineExceeded(f"the request's deadline passed before {what}")
