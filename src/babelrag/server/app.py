"""The HTTP API (FastAPI) and the web page: search, ask (optionally streamed as server-sent events),
ingest and delete, KBs, runs and their cell reports.

What one request can do is bounded: every client setting is capped (``schemas.py``), each request's
work runs under a deadline that stops it between model calls and write batches (the client is never
told "timed out" for work that then goes on), LLM work passes a bounded gate (429 when full), each
client has a rate limit, writes need a key and are serialised per KB and all-or-nothing, reads may
need a key too, and only the configured Host names are served (no DNS rebinding). Error messages
and traces never carry the store's paths, endpoint URLs, or whether another user asked the same.
"""
from __future__ import annotations

import asyncio
import hmac
import json
import logging
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from importlib.resources import files
from typing import Any, TypeVar

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, StreamingResponse
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool
from starlette.middleware.trustedhost import TrustedHostMiddleware

from babelrag import __version__, deadline
from babelrag.config import PRESETS
from babelrag.errors import BabelragError, ConfigError
from babelrag.generate.answerer import Answerer
from babelrag.ingest.pipeline import IngestOptions, index_records
from babelrag.ingest.readers import RawRecord
from babelrag.ingest.records import Defaults, validate_all
from babelrag.jsonl import numbered_lines
from babelrag.retrieve.pipeline import Searcher
from babelrag.server.openai_compat import add_chat_routes
from babelrag.server.schemas import AskBody, SearchBody
from babelrag.server.service import Service
from babelrag.server.streaming import EXPECTED, GRACE, Emit, events_of, public, refusal
from babelrag.store.schema import Match, Where, check_kb_name
from babelrag.types import Question

T = TypeVar("T")
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
MAX_DEPTH = 20  # JSON nesting a document may have


def public_trace(result: dict[str, Any]) -> dict[str, Any]:
    """A result as clients see it: models named without their endpoint, no word on what was cached
    (that would tell a client what others asked)."""
    trace = result.get("trace") or {}
    for call in trace.get("llm_calls", []):
        call["model"] = str(call.get("model", "")).split("@")[0]
        call.pop("cached", None)
    return result


def _depth(value: Any, level: int = 0) -> int:
    """How deeply ``value`` nests (stops counting past the limit); an integer out of 64-bit range counts as
    too deep, since no store can keep it."""
    if level > MAX_DEPTH:
        return level
    if isinstance(value, int) and not isinstance(value, bool) and not -2 ** 63 <= value < 2 ** 63:
        return MAX_DEPTH + 1
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return max((_depth(child, level + 1) for child in children), default=level)


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a number a document may hold")


class BodyLimit:
    """ASGI middleware: refuse a body over ``limit`` bytes (413), declared or streamed."""

    def __init__(self, app: Any, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            return await JSONResponse({"detail": f"body over {self.limit} bytes"}, 413)(scope, receive, send)
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

    app = FastAPI(title="babelrag", version=__version__, lifespan=lifespan,
                  description="Multilingual retrieval-augmented generation: search, answers, ingest, cell reports.")
    app.add_middleware(BodyLimit, limit=service.max_body)
    if service.allowed_hosts:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(service.allowed_hosts))
    if cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=cors_origins, allow_methods=["GET", "POST", "DELETE"],
                           allow_headers=["*"])
    key_header = APIKeyHeader(name="X-API-Key", auto_error=False)
    bearer = HTTPBearer(auto_error=False)  # how OpenAI clients send their api_key

    def presented(header: str | None = Depends(key_header),
                  token: HTTPAuthorizationCredentials | None = Depends(bearer)) -> str | None:
        return header or (token.credentials if token else None)

    def valid(key: str | None, keys: frozenset[str]) -> bool:
        return key is not None and any(hmac.compare_digest(key.encode(), k.encode()) for k in keys)

    def reader(key: str | None = Depends(presented)) -> None:
        if service.read_keys and not valid(key, service.read_keys | service.api_keys):
            raise HTTPException(401, "a valid key is required (X-API-Key header or Authorization: Bearer)")

    def writer(key: str | None = Depends(presented)) -> None:
        if not service.api_keys:
            raise HTTPException(403, "writes are disabled: start the service with an API key")
        if not valid(key, service.api_keys):
            raise HTTPException(401, "a valid X-API-Key header is required for writes")

    def limited(request: Request) -> None:
        if not service.rate.allow(request.client.host if request.client else "?"):
            raise HTTPException(429, "too many requests from this client; slow down", headers={"Retry-After": "5"})

    async def run(work: Callable[[], T], write: bool = False) -> T:
        """Reads answer 504 at their deadline (their work stops there too); writes are always answered
        with their true outcome — done, or stopped at the deadline and rolled back."""
        def bounded() -> T:
            with deadline.limit(service.timeout):
                return work()
        try:
            if write:
                return await run_in_threadpool(bounded)
            return await asyncio.wait_for(run_in_threadpool(bounded), timeout=service.timeout + GRACE)
        except TimeoutError as error:
            raise HTTPException(504, f"the request took longer than {service.timeout:.0f} s") from error
        except EXPECTED as error:
            raise refusal(error) from error

    def config_of(body: SearchBody) -> Any:
        try:
            return body.config(service.llm, service.defaults, service.timeout)
        except ConfigError as error:
            raise HTTPException(400, public(str(error))) from error

    def question_of(body: SearchBody) -> Question:
        return Question(body.question, lang=body.lang, country=body.country)

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "version": __version__}

    @app.get("/presets", dependencies=[Depends(reader)])
    def presets() -> list[str]:
        return list(PRESETS)

    @app.get("/kbs", dependencies=[Depends(reader)])
    async def kbs() -> list[dict[str, Any]]:
        def listing() -> list[dict[str, Any]]:
            out = []
            for name in service.store.list():
                try:
                    manifest = service.kb(name).manifest
                except BabelragError as error:  # one broken or foreign collection does not hide the others
                    out.append({"kb": name, "error": public(str(error))})
                    continue
                out.append({"kb": name, "passages": manifest["passages"], "documents": manifest["documents"],
                            "languages": manifest["languages"].get("all", {}),
                            "countries": sorted(manifest["languages"].get("countries", {}))})
            return out
        return await run(listing)

    @app.post("/search", dependencies=[Depends(reader), Depends(limited)])
    async def search(body: SearchBody) -> dict[str, Any]:
        config = config_of(body)

        def work() -> dict[str, Any]:
            searcher = Searcher(service.kb(body.kb), config)
            if not config.query_uses_llm():
                return public_trace(searcher.search(question_of(body)).to_dict())
            with service.gate.enter():
                return public_trace(searcher.search(question_of(body)).to_dict())
        return await run(work)

    @app.post("/ask", response_model=None, dependencies=[Depends(reader), Depends(limited)])
    async def ask(body: AskBody) -> dict[str, Any] | StreamingResponse:
        config = config_of(body)
        if not body.stream:
            def work() -> dict[str, Any]:
                with service.gate.enter():
                    return public_trace(Answerer(service.kb(body.kb), config).ask(question_of(body)).to_dict())
            return await run(work)
        def streamed(emit: Emit) -> None:  # stops at the deadline, or when the client goes away
            with service.gate.enter():
                answer = Answerer(service.kb(body.kb), config).ask(question_of(body),
                                                                   on_text=lambda t: emit("token", {"text": t}))
            emit("answer", public_trace(answer.to_dict()))

        async def stream() -> AsyncIterator[str]:
            async for kind, data in events_of(streamed, service.timeout):
                if isinstance(data, HTTPException):
                    data = {"status": data.status_code, "detail": data.detail}
                yield f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")

    @app.post("/kbs/{kb}/documents", dependencies=[Depends(writer)])
    async def add_documents(kb: str, request: Request) -> dict[str, Any]:
        try:
            check_kb_name(kb)
        except ConfigError as error:
            raise HTTPException(400, str(error)) from error
        rows = await _documents(request)

        def work() -> dict[str, Any]:
            records = validate_all((RawRecord(r, "request", i) for i, r in enumerate(rows, start=1)), Defaults())
            with service.writing(), service.write_locks[kb]:
                handle = service.kb(kb) if service.store.exists(kb) else None
                report = index_records(kb, records, service.store, IngestOptions(), kb=handle)
            return {"kb": kb, "documents": report.documents, "passages": report.passages,
                    "languages": report.languages}
        return await run(work, write=True)

    @app.delete("/kbs/{kb}/documents/{record_id:path}", dependencies=[Depends(writer)])  # ids may hold "/"
    async def delete_document(kb: str, record_id: str) -> dict[str, Any]:
        def work() -> dict[str, Any]:
            handle = service.kb(kb)
            with service.writing(), service.write_locks[kb]:
                removed = handle.collection.delete(Where(must=(Match("record_id", (record_id,)),)))
                if removed:
                    handle.refresh_manifest()
            if not removed:
                raise HTTPException(404, f"no document '{record_id}' in '{kb}'")
            return {"kb": kb, "deleted": record_id, "passages": removed}
        return await run(work, write=True)

    @app.get("/runs", dependencies=[Depends(reader)])
    def runs() -> list[dict[str, Any]]:
        if not service.runs.is_dir():
            return []
        return [{"id": folder.name, "complete": (folder / "COMPLETE").exists()}
                for folder in sorted(service.runs.iterdir()) if (folder / "metrics.json").is_file()]

    @app.get("/runs/{run_id}/report", response_class=HTMLResponse, dependencies=[Depends(reader)])
    async def run_report(run_id: str) -> HTMLResponse:
        folder = service.runs / run_id
        if not RUN_ID.fullmatch(run_id) or folder.resolve().parent != service.runs.resolve() or not folder.is_dir():
            raise HTTPException(404, f"no run '{run_id}'")
        from babelrag.evaluate.report import html, load_summary

        return HTMLResponse(await run(lambda: html(load_summary([folder]))))

    add_chat_routes(app, service, reader, limited, run)

    @app.get("/", response_class=HTMLResponse)
    def page() -> HTMLResponse:
        return HTMLResponse(files("babelrag.server").joinpath("static/index.html").read_text(encoding="utf-8"))

    return app


async def _documents(request: Request) -> list[dict[str, Any]]:
    """A JSON array, ``{"documents": [...]}`` or JSONL; each row a record, numbered for errors."""
    raw = await request.body()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise HTTPException(400, "body is not UTF-8") from error
    try:
        if "ndjson" in request.headers.get("content-type", "") or "jsonl" in request.headers.get("content-type", ""):
            rows = []
            for number, line in numbered_lines(text):
                if line.strip():
                    try:
                        rows.append(json.loads(line, parse_constant=_no_constants))
                    except json.JSONDecodeError as error:
                        raise HTTPException(400, f"line {number}: invalid JSON ({error.msg})") from error
                    except ValueError as error:
                        raise HTTPException(400, f"line {number}: {error}") from error
        else:
            try:
                payload = json.loads(text, parse_constant=_no_constants)
            except json.JSONDecodeError as error:
                raise HTTPException(400, f"invalid JSON ({error.msg} at line {error.lineno})") from error
            except ValueError as error:
                raise HTTPException(400, str(error)) from error
            rows = payload.get("documents", [payload]) if isinstance(payload, dict) else payload
    except RecursionError as error:
        raise HTTPException(400, f"JSON nested too deeply (at most {MAX_DEPTH} levels)") from error
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise HTTPException(400, "expected a JSON array of documents, {\"documents\": [...]}, or JSONL")
    if len(rows) > 10_000:
        raise HTTPException(413, "at most 10,000 documents per request")
    if any(_depth(row) > MAX_DEPTH for row in rows):
        raise HTTPException(400, f"a document is nested too deeply (at most {MAX_DEPTH} levels) or holds an "
                                 f"integer past 64 bits")
    for number, row in enumerate(rows, start=1):
        for name in ("metadata",):
            if name in row and not isinstance(row[name], dict):
                raise HTTPException(400, f"request:{number}: field '{name}': expected an object")
    return rows
