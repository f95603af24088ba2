"""``/search`` and ``/ask`` (optionally streamed as server-sent events).

The key and the rate limit are checked before the body is read; the body is decoded and validated off
the event loop; the work runs under the request's deadline and is called off when the client gets its
504 or goes away. A search that queries a model passes the LLM gate, as every answer does; a question
longer than one embedding window waits for the long-question slot (``Service.embedding_slot``).
"""
from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from fastapi.responses import StreamingResponse

from babelrag.config import SearchConfig
from babelrag.errors import ConfigError
from babelrag.generate.answerer import Answerer
from babelrag.retrieve.pipeline import Searcher
from babelrag.server.access import limited, reader, service_of
from babelrag.server.bodies import parsed
from babelrag.server.schemas import AskBody, SearchBody
from babelrag.server.service import Service
from babelrag.server.streaming import Emit, events_of, public, rendered, run
from babelrag.types import Question

router = APIRouter(dependencies=[Depends(reader), Depends(limited)])


def public_trace(result: dict[str, Any]) -> dict[str, Any]:
    """A result as clients see it: models named without their endpoint, no word on what was cached
    (that would tell a client what others asked)."""
    trace = result.get("trace") or {}
    for call in trace.get("llm_calls", []):
        call["model"] = str(call.get("model", "")).split("@")[0]
        call.pop("cached", None)
    return result


def config_of(body: SearchBody, service: Service) -> SearchConfig:
    try:
        return body.config(service.llm, service.defaults, service.timeout)
    except ConfigError as error:
        raise HTTPException(400, public(str(error))) from error


def question_of(body: SearchBody) -> Question:
    return Question(body.question, lang=body.lang, country=body.country)


def _documented(model: type[SearchBody]) -> dict[str, Any]:
    """The body's schema for the API docs: the route reads its body itself (after the key check)."""
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": model.model_json_schema()}}}}


@router.post("/search", openapi_extra=_documented(SearchBody))
async def search(request: Request, service: Service = Depends(service_of)) -> Response:
    body = await parsed(request, SearchBody)
    config = config_of(body, service)

    def work() -> Response:
        kb = service.kb(body.kb)
        searcher = Searcher(kb, config)
        with service.embedding_slot(kb, body.question):
            if not config.query_uses_llm():
                return rendered(public_trace(searcher.search(question_of(body)).to_dict()))
            with service.gate.enter():
                return rendered(public_trace(searcher.search(question_of(body)).to_dict()))
    return await run(service.timeout, work, request)


@router.post("/ask", response_model=None, openapi_extra=_documented(AskBody))
async def ask(request: Request, service: Service = Depends(service_of)) -> Response:
    body = await parsed(request, AskBody)
    config = config_of(body, service)
    if not body.stream:
        def work() -> Response:
            with service.gate.enter():
                answer = Answerer(service.kb(body.kb), config).ask(question_of(body))
            return rendered(public_trace(answer.to_dict()))
        return await run(service.timeout, work, request)

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
