"""The HTTP API (FastAPI) and the web page: search, ask (optionally streamed as server-sent events),
ingest and delete, KBs, runs and their cell reports.

Blocking work runs in the thread pool under a per-request timeout; LLM work passes a bounded gate
(429 when full); writes need an API key (constant-time comparison) and are serialised per KB;
bodies over the size limit are refused before they are read. CORS stays off unless asked for.
"""
from __future__ import annotations

import asyncio
import hmac
import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from importlib.resources import files
from typing import Any, TypeVar

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, StreamingResponse
from fastapi.security import APIKeyHeader
from starlette.concurrency import run_in_threadpool

from babelrag import __version__
from babelrag.config import PRESETS
from babelrag.errors import BabelragError, ConfigError, InputError, KBNotFound
from babelrag.generate.answerer import Answerer
from babelrag.ingest.pipeline import IngestOptions, index_records
from babelrag.ingest.readers import RawRecord
from babelrag.ingest.records import Defaults, validate_all
from babelrag.jsonl import numbered_lines
from babelrag.retrieve.pipeline import Searcher
from babelrag.server.schemas import AskBody, SearchBody
from babelrag.server.service import Busy, Service
from babelrag.store.schema import Match, Where, check_kb_name
from babelrag.types import Question

T = TypeVar("T")
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


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
        yield
        service.close()

    app = FastAPI(title="babelrag", version=__version__, lifespan=lifespan,
                  description="Multilingual retrieval-augmented generation: search, answers, ingest, cell reports.")
    app.state.workers = set()
    app.add_middleware(BodyLimit, limit=service.max_body)
    if cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=cors_origins, allow_methods=["GET", "POST", "DELETE"],
                           allow_headers=["*"])
    key_header = APIKeyHeader(name="X-API-Key", auto_error=False)

    def writer(key: str | None = Depends(key_header)) -> None:
        if not service.api_keys:
            raise HTTPException(403, "writes are disabled: start the service with an API key")
        if key is None or not any(hmac.compare_digest(key.encode(), k.encode()) for k in service.api_keys):
            raise HTTPException(401, "a valid X-API-Key header is required for writes")

    async def run(work: Callable[[], T]) -> T:
        try:
            return await asyncio.wait_for(run_in_threadpool(work), timeout=service.timeout)
        except TimeoutError as error:
            raise HTTPException(504, f"the request took longer than {service.timeout:.0f} s") from error
        except Busy as error:
            raise HTTPException(429, "busy: every LLM slot is taken; retry shortly",
                                headers={"Retry-After": "5"}) from error
        except KBNotFound as error:
            raise HTTPException(404, str(error)) from error
        except (ConfigError, InputError) as error:
            raise HTTPException(400, str(error)) from error
        except BabelragError as error:
            raise HTTPException(503, str(error)) from error

    def config_of(body: SearchBody) -> Any:
        try:
            return body.config(service.llm, service.defaults)
        except ConfigError as error:
            raise HTTPException(400, str(error)) from error

    def question_of(body: SearchBody) -> Question:
        return Question(body.question, lang=body.lang, country=body.country)

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "version": __version__}

    @app.get("/presets")
    def presets() -> list[str]:
        return list(PRESETS)

    @app.get("/kbs")
    async def kbs() -> list[dict[str, Any]]:
        def listing() -> list[dict[str, Any]]:
            out = []
            for name in service.store.list():
                manifest = service.kb(name).manifest
                out.append({"kb": name, "passages": manifest["passages"], "documents": manifest["documents"],
                            "languages": manifest["languages"].get("all", {}),
                            "countries": sorted(manifest["languages"].get("countries", {}))})
            return out
        return await run(listing)

    @app.post("/search")
    async def search(body: SearchBody) -> dict[str, Any]:
        config = config_of(body)

        def work() -> dict[str, Any]:
            searcher = Searcher(service.kb(body.kb), config)
            if config.strategy == "as_written" and not config.extra_paths:
                return searcher.search(question_of(body)).to_dict()
            with service.gate.enter():
                return searcher.search(question_of(body)).to_dict()
        return await run(work)

    @app.post("/ask", response_model=None)
    async def ask(body: AskBody) -> dict[str, Any] | StreamingResponse:
        config = config_of(body)
        if not body.stream:
            def work() -> dict[str, Any]:
                with service.gate.enter():
                    return Answerer(service.kb(body.kb), config).ask(question_of(body)).to_dict()
            return await run(work)
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

        def emit(kind: str, data: Any) -> None:
            loop.call_soon_threadsafe(events.put_nowait, (kind, data))

        def streamed() -> None:
            try:
                with service.gate.enter():
                    answer = Answerer(service.kb(body.kb), config).ask(question_of(body),
                                                                       on_text=lambda t: emit("token", {"text": t}))
                emit("answer", answer.to_dict())
            except Busy:
                emit("error", {"status": 429, "detail": "busy: every LLM slot is taken; retry shortly"})
            except BabelragError as error:
                emit("error", {"status": 400, "detail": str(error)})
            finally:
                emit("end", None)

        async def stream() -> AsyncIterator[str]:
            worker = asyncio.ensure_future(run_in_threadpool(streamed))  # runs to its end even if the client leaves
            app.state.workers.add(worker)
            worker.add_done_callback(app.state.workers.discard)
            try:
                while True:
                    kind, data = await asyncio.wait_for(events.get(), timeout=service.timeout)
                    if kind == "end":
                        break
                    yield f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n"
            except TimeoutError:
                yield f"event: error\ndata: {json.dumps({'status': 504, 'detail': 'timed out'})}\n\n"

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
            with service.write_locks[kb]:
                handle = service.kb(kb) if service.store.exists(kb) else None
                report = index_records(kb, records, service.store, IngestOptions(), kb=handle)
            return {"kb": kb, "documents": report.documents, "passages": report.passages,
                    "languages": report.languages}
        return await run(work)

    @app.delete("/kbs/{kb}/documents/{record_id}", dependencies=[Depends(writer)])
    async def delete_document(kb: str, record_id: str) -> dict[str, Any]:
        def work() -> dict[str, Any]:
            handle = service.kb(kb)
            with service.write_locks[kb]:
                removed = handle.collection.delete(Where(must=(Match("record_id", (record_id,)),)))
                if removed:
                    handle.refresh_manifest()
            if not removed:
                raise HTTPException(404, f"no document '{record_id}' in '{kb}'")
            return {"kb": kb, "deleted": record_id, "passages": removed}
        return await run(work)

    @app.get("/runs")
    def runs() -> list[dict[str, Any]]:
        if not service.runs.is_dir():
            return []
        return [{"id": folder.name, "complete": (folder / "COMPLETE").exists()}
                for folder in sorted(service.runs.iterdir()) if (folder / "metrics.json").is_file()]

    @app.get("/runs/{run_id}/report", response_class=HTMLResponse)
    async def run_report(run_id: str) -> HTMLResponse:
        folder = service.runs / run_id
        if not RUN_ID.match(run_id) or folder.resolve().parent != service.runs.resolve() or not folder.is_dir():
            raise HTTPException(404, f"no run '{run_id}'")
        from babelrag.evaluate.report import html, load_summary

        return HTMLResponse(await run(lambda: html(load_summary([folder]))))

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
    if "ndjson" in request.headers.get("content-type", "") or "jsonl" in request.headers.get("content-type", ""):
        rows = []
        for number, line in numbered_lines(text):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as error:
                    raise HTTPException(400, f"line {number}: invalid JSON ({error.msg})") from error
    else:
        try:
            payload = json.loads(text)
        except json.JSONDecodeError as error:
            raise HTTPException(400, f"invalid JSON ({error.msg} at line {error.lineno})") from error
        rows = payload.get("documents", [payload]) if isinstance(payload, dict) else payload
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise HTTPException(400, "expected a JSON array of documents, {\"documents\": [...]}, or JSONL")
    if len(rows) > 10_000:
        raise HTTPException(413, "at most 10,000 documents per request")
    return rows
