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

_deadline: ContextVar[float | None] = ContextVar("babelrag_deadline", default=None)


class DeadlineExceeded(BabelragError):
    """The request's time ran out; the work stopped (nothing half-written stays)."""


@contextmanager
def limit(seconds: float) -> Iterator[None]:
    token = _deadline.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _deadline.reset(token)


def remaining() -> float | None:
    """Seconds left, or None without a deadline."""
    deadline = _deadline.get()
    return None if deadline is None else deadline - time.monotonic()


def check(what: str) -> None:
    left = remaining()
    if left is not None and left <= 0:
        raise DeadlineExceeded(f"the request's deadline passed before {what}")
