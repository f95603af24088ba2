"""What a failed request tells its client, and streamed work: a worker thread whose events reach the
response as they happen, under the request's deadline, ending with an error event on any failure.

Shared by ``/ask`` (server-sent events) and the OpenAI-compatible chat stream.
"""
from __future__ import annotations

import asyncio
import logging
import re
import sqlite3
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import HTTPException
from starlette.concurrency import run_in_threadpool

from babelrag import deadline
from babelrag.errors import BabelragError, ConfigError, InputError, KBNotFound
from babelrag.server.service import Busy, ShuttingDown

GRACE = 10.0  # seconds past the deadline before the request is answered 504 anyway (a stuck native call)
EXPECTED = (BabelragError, Busy, sqlite3.Error)  # failures with an answer of their own; anything else is a 500
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"<>]+", re.IGNORECASE)
_PATH = re.compile(r"(?<![\w.])/(?:[\w.@+-]+/)*[\w.@+-]*[\w@+-]")
log = logging.getLogger("babelrag.server")

Emit = Callable[[str, Any], None]


def public(message: str) -> str:
    """An error message without the server's file paths or endpoint URLs (credentials can ride in them)."""
    return _PATH.sub("<path>", _URL.sub("<endpoint>", message))


def refusal(error: Exception) -> HTTPException:
    """What a failed request tells its client."""
    if isinstance(error, Busy):
        return HTTPException(429, "busy: every LLM slot is taken; retry shortly", headers={"Retry-After": "5"})
    if isinstance(error, deadline.DeadlineExceeded):
        return HTTPException(504, f"{public(str(error))}; the work was stopped and nothing was written")
    if isinstance(error, KBNotFound):
        return HTTPException(404, public(str(error)))
    if isinstance(error, (ConfigError, InputError)):
        return HTTPException(400, public(str(error)))
    if isinstance(error, ShuttingDown):
        return HTTPException(503, str(error), headers={"Retry-After": "10"})
    if isinstance(error, sqlite3.Error):
        return HTTPException(503, "a cache or index file is unavailable (full disk? locked?); retry later")
    return HTTPException(503, public(str(error)))


async def events_of(work: Callable[[Emit], None], seconds: float) -> AsyncIterator[tuple[str, Any]]:
    """Run ``work(emit)`` on a worker thread under a ``seconds`` deadline and yield each ``(kind, data)`` it
    emits. A failure ends the stream with ``("error", HTTPException)`` — an unexpected one is logged and
    reported as a 500, never a silent end; a worker stuck past the deadline, as a 504. A client that
    goes away calls the deadline off, so generation stops rather than running on for nobody."""
    loop = asyncio.get_running_loop()
    events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    budget = deadline.Budget(seconds)

    def emit(kind: str, data: Any) -> None:
        loop.call_soon_threadsafe(events.put_nowait, (kind, data))

    def worker() -> None:
        try:
            with deadline.limit(budget):
                work(emit)
        except EXPECTED as error:
            emit("error", refusal(error))
        except Exception:  # noqa: BLE001 - reported to the client, logged in full here
            log.exception("a streamed request failed")
            emit("error", HTTPException(500, "internal error (logged on the server)"))
        finally:
            emit("end", None)

    task = asyncio.ensure_future(run_in_threadpool(worker))  # referenced until the stream ends
    try:
        while True:
            kind, data = await asyncio.wait_for(events.get(), timeout=seconds + GRACE)
            if kind == "end":
                return
            yield kind, data
    except TimeoutError:
        yield "error", HTTPException(504, f"the request took longer than {seconds:.0f} s")
    finally:
        budget.cancel()
        del task
