"""A request's work under its deadline, and what a failed request tells its client.

``run`` answers at once: the work runs on a worker thread, its JSON rendered there too (never on the
event loop), and when the client gets its 504 — or goes away — the work's deadline is called off, so it
stops at its next check instead of computing on for nobody. ``events_of`` streams a worker's events as
they happen, ending with an error event on any failure (``/ask`` as server-sent events, the
OpenAI-compatible chat stream).
"""
from __future__ import annotations

import asyncio
import json
import logging
import re
import sqlite3
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from fastapi import HTTPException, Request, Response
from starlette.concurrency import run_in_threadpool

from babelrag import deadline
from babelrag.errors import BabelragError, ConfigError, IndexMismatch, InputError, KBNotFound, KBNotReady, Unreadable
from babelrag.server.service import Busy, ShuttingDown

GRACE = 10.0  # seconds past the deadline before the request is answered 504 anyway (a stuck native call)
EXPECTED = (BabelragError, Busy, sqlite3.Error)  # failures with an answer of their own; anything else is a 500
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"<>]+", re.IGNORECASE)
_PATH = re.compile(r"(?<![\w.])/(?:[\w.@+-]+/)*[\w.@+-]*[\w@+-]")
log = logging.getLogger("babelrag.server")

Emit = Callable[[str, Any], None]
T = TypeVar("T")


def public(message: str) -> str:
    """An error message without the server's file paths or endpoint URLs (credentials can ride in them)."""
    return _PATH.sub("<path>", _URL.sub("<endpoint>", message))


def refusal(error: Exception) -> HTTPException:
    """What a failed request tells its client."""
    if isinstance(error, Busy):
        return HTTPException(429, "busy: every slot for this kind of work is taken; retry shortly",
                             headers={"Retry-After": "5"})
    if isinstance(error, deadline.DeadlineExceeded):
        return HTTPException(504, f"{public(str(error))}; the work was stopped and nothing was written")
    if isinstance(error, KBNotFound):
        return HTTPException(404, public(str(error)))
    if isinstance(error, (ConfigError, InputError)):
        return HTTPException(400, public(str(error)))
    if isinstance(error, KBNotReady):
        return HTTPException(409, str(error), headers={"Retry-After": "5"})
    if isinstance(error, (Unreadable, IndexMismatch)):
        log.warning("refused: %s", error)
    if isinstance(error, Unreadable):
        return HTTPException(503, f"{error.public}; the operator's log has the details")
    if isinstance(error, IndexMismatch):  # which versions differ is the operator's business
        return HTTPException(503, f"knowledge base '{error.kb}' was built by other components than this server "
                                  f"runs; the operator must rebuild it")
    if isinstance(error, ShuttingDown):
        return HTTPException(503, str(error), headers={"Retry-After": "10"})
    if isinstance(error, sqlite3.Error):
        return HTTPException(503, "a cache or index file is unavailable (full disk? locked?); retry later")
    log.warning("refused: %s", error)
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


async def run(seconds: float, work: Callable[[], T], request: Request | None = None, write: bool = False) -> T:
    """``work()`` on a worker thread under a ``seconds`` deadline. A read is answered 504 at its deadline
    (a native call stuck past it, ``GRACE`` later) and its work called off then, or as soon as the
    client (``request``) goes away; a write is always answered with its true outcome — done, or stopped
    at the deadline and rolled back — so nobody is told "timed out" about a write that then lands."""
    budget = deadline.Budget(seconds)

    def bounded() -> T:
        with deadline.limit(budget):
            return work()
    try:
        if write:
            return await run_in_threadpool(bounded)
        task = asyncio.ensure_future(run_in_threadpool(bounded))
        watchers = {task} | ({asyncio.ensure_future(_gone(request))} if request is not None else set())
        try:
            await asyncio.wait(watchers, timeout=seconds + GRACE, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for watcher in watchers - {task}:
                watcher.cancel()
        if not task.done():
            raise HTTPException(504, f"the request took longer than {seconds:.0f} s")
        return task.result()
    except EXPECTED as error:
        raise refusal(error) from error
    finally:
        if not write:
            budget.cancel()  # answered (or abandoned): whatever still runs stops at its next deadline check


async def _gone(request: Request) -> None:
    """Returns when the client disconnects (its body was read already)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def rendered(result: Any) -> Response:
    """A JSON response rendered where it is called: in the worker, not on the event loop (a search's
    trace with 100 passages is hundreds of kilobytes)."""
    return Response(json.dumps(result, ensure_ascii=False, allow_nan=False).encode(), media_type="application/json")
