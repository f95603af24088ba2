"""``/search`` and ``/ask`` (optionally streamed as server-sent events; ``/ask`` with a conversation's
earlier turns makes the question standalone first).

The key and the rate limit are checked before the body is read; the body is decoded and validated off
the event loop; the work runs under the request's deadline and is called off when the client gets its
504 or goes away. Codes are checked against the KB (``door.py``): what it lacks is a warning in the
response's ``warnings``, or a 400 when nothing could be found. A search that queries a model passes the
LLM gate, as every answer does; a question longer than one embedding window waits for the long-question
slot (``Service.embedding_slot``).
"""
from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from fastapi.responses import StreamingResponse

from babelrag.config import SearchConfig, finding_calls_llm
from babelrag.door import Checked, checked
from babelrag.errors import ConfigError
from babelrag.generate.answerer import Answerer
from babelrag.kb import KnowledgeBase
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


def door(body: SearchBody, config: SearchConfig, kb: KnowledgeBase) -> Checked:
    """The question and configuration checked against what the KB holds (a warning, or a 400)."""
    return checked(Question(body.question, lang=body.lang, country=body.country), config, kb.manifest.languages)


def _documented(model: type[SearchBody]) -> dict[str, Any]:
    """The body's schema for the API docs: the route reads its body itself (after the key check)."""
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": model.model_json_schema()}}}}


@router.post("/search", openapi_extra=_documented(SearchBody))
async def search(request: Request, service: Service = Depends(service_of)) -> Response:
    body = await parsed(request, SearchBody)
    config = config_of(body, service)

    def work() -> Response:
        kb = service.kb(body.kb)
        checked = door(body, config, kb)
        searcher = Searcher(kb, checked.config)
        with service.embedding_slot(kb, body.question), \
                (service.gate.enter() if finding_calls_llm(config) else contextlib.nullcontext()):
            result = searcher.search(checked.question)
        checked.noted(result.trace)
        return rendered(public_trace(result.to_dict()))
    return await run(service.timeout, work, request)


@router.post("/ask", response_model=None, openapi_extra=_documented(AskBody))
async def ask(request: Request, service: Service = Depends(service_of)) -> Response:
    body = await parsed(request, AskBody)
    config = config_of(body, service)
    history = [(turn.role, turn.content) for turn in body.history]

    def answered(on_text: Callable[[str], None] | None = None) -> dict[str, Any]:
        kb = service.kb(body.kb)
        checked = door(body, config, kb)
        with service.gate.enter():
            answer = Answerer(kb, checked.config).ask(checked.question, on_text=on_text, history=history)
        checked.noted(answer.trace)
        return public_trace(answer.to_dict())

    if not body.stream:
        return await run(service.timeout, lambda: rendered(answered()), request)

    def streamed(emit: Emit) -> None:  # stops at the deadline, or when the client goes away
        emit("answer", answered(lambda t: emit("token", {"text": t})))

    async def stream() -> AsyncIterator[str]:
        async for kind, data in events_of(streamed, service.timeout):
            if isinstance(data, HTTPException):
                data = {"status": data.status_code, "detail": data.detail}
            yield f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n"

    return StreamingResponse(stream(), media_type="text/event-stream")
