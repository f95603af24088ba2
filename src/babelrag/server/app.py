"""The HTTP API (FastAPI) and the web page: search, ask (optionally streamed as server-sent events),
ingest and delete, KBs, runs and their cell reports, an OpenAI-compatible chat face.

What one request can do is bounded: keys are checked before a body is read, a body is read under a
byte and value budget and decoded off the event loop (``bodies.py``), every client setting is capped
and typed (``schemas.py``), each request's work runs under a deadline that stops it between model
calls, embedding passes and write batches and is called off when the client gets its 504
(``streaming.py``), LLM work and long questions pass bounded gates (429 when full), each client has a
rate limit, writes need a key and are serialised per KB and all-or-nothing, reads may need a key too
(the API docs included), and only the configured Host names are served (no DNS rebinding). Errors
name the field and the problem, never echo the input, and never carry the store's paths, endpoint
URLs, component versions, or whether another user asked the same. Routes live in ``routes/``, one
module per resource.
"""
from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware

from babelrag import __version__
from babelrag.server.openai_errors import on_http_error, on_invalid, refusal_body
from babelrag.server.routes import answers, kbs, openai, pages, runs
from babelrag.server.service import Service


class BodyLimit:
    """ASGI middleware: refuse a body over ``limit`` bytes (413), declared or streamed — the ceiling over
    every route's own budget (``bodies.py``)."""

    def __init__(self, app: Any, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            return await JSONResponse(refusal_body(scope.get("path", ""), 413, f"body over {self.limit} bytes"),
                                      413)(scope, receive, send)
        seen = 0

        async def counted() -> dict[str, Any]:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise HTTPException(413, f"body over {self.limit} bytes")
            return message

        await self.app(scope, counted, send)


def create_app(service: Service, cors_origins: list[str] | None = None) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        for problem in await run_in_threadpool(service.warm):
            logging.getLogger("babelrag.server").warning("not loaded before the first request: %s", problem)
        yield
        service.close()  # takes no new writes, waits for those running, then closes the stores

    app = FastAPI(title="babelrag", version=__version__, lifespan=lifespan, openapi_url=None, docs_url=None,
                  redoc_url=None,  # served by routes/pages.py, behind the read key
                  description="Multilingual retrieval-augmented generation: search, answers, ingest, cell reports.")
    app.state.service = service
    app.add_exception_handler(RequestValidationError, on_invalid)
    app.add_exception_handler(StarletteHTTPException, on_http_error)  # /v1 answers as OpenAI does
    app.add_middleware(BodyLimit, limit=service.max_body)
    if service.allowed_hosts:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(service.allowed_hosts))
    if cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=cors_origins, allow_methods=["GET", "POST", "DELETE"],
                           allow_headers=["*"])
    for module in (pages, answers, kbs, runs, openai):
        app.include_router(module.router)
    app.include_router(pages.docs)
    return app
