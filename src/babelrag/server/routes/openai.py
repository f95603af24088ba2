"""An OpenAI-compatible chat endpoint: any chat UI or SDK that speaks chat-completions can ask a KB.

``model`` names a KB and a preset: ``xquad-dev`` (MultiRAG), ``xquad-dev:chat``, ``xquad-dev:tuned``…
(``GET /v1/models`` lists them). The question is the **last user message**; its language is detected
(or ``lang`` given beside the messages, as ``country`` may be). Earlier turns and system messages are
not read: the answer comes from the KB's evidence for that question alone, so rephrase a follow-up
as a full question. The answer cites its passages as [n] in the text, and the passages travel in the
extra field ``citations`` (number, id, doc_id, lang, source_lang, translated, text) — in the last
chunk when streamed — with ``warnings`` for any model failure on the way. Auth, rate limits, body
budgets, deadlines and the LLM gate are those of ``/ask``.
"""
from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from babelrag.errors import BabelragError
from babelrag.generate.answerer import Answerer
from babelrag.server.access import limited, reader, service_of
from babelrag.server.bodies import CHAT, parsed, problems
from babelrag.server.schemas import KB_PATTERN, LANG, LIMITS, SearchBody, country_code
from babelrag.server.service import Service
from babelrag.server.streaming import Emit, events_of, public, rendered, run
from babelrag.types import Answer, Question

DEFAULT_PRESET = "multirag"
LISTED_PRESETS = ("multirag", "chat", "delta+crossrag")


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "user", "assistant", "tool", "developer"]
    content: str | list[dict[str, Any]] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):  # content parts: the text ones
            return " ".join(str(part.get("text", "")) for part in self.content if part.get("type") == "text")
        return self.content or ""


class ChatBody(BaseModel):
    model_config = ConfigDict(extra="allow")  # OpenAI clients send more (temperature, user, …): ignored

    model: str = Field(min_length=1, max_length=140)
    messages: list[ChatMessage] = Field(min_length=1, max_length=200)
    stream: bool = False
    max_tokens: int | None = Field(None, ge=1, strict=True)  # clamped to the answer-token limit, as /ask does
    country: str | None = None
    lang: str | None = Field(None, pattern=LANG)

    @field_validator("country")
    @classmethod
    def _iso_country(cls, value: str | None) -> str | None:
        return country_code(value)

    def target(self) -> tuple[str, str]:
        kb, _, preset = self.model.partition(":")
        return kb, preset or DEFAULT_PRESET

    def question(self) -> str:
        users = [m for m in self.messages if m.role == "user" and m.text().strip()]
        if not users:
            raise HTTPException(400, "messages: no user message with text (the last one is the question)")
        text = users[-1].text().strip()
        if len(text) > 2000:
            raise HTTPException(400, "the question (last user message) is over 2,000 characters")
        return text


def cited_text(answer: Answer) -> str:
    """The answer with its citations as [n]; attributed ones (the model named none) are appended."""
    if answer.cited_how == "attributed":
        return f"{answer.text} " + "".join(f"[{c.number}]" for c in answer.citations)
    return answer.text


def citations(answer: Answer) -> list[dict[str, Any]]:
    return [{"number": c.number, "id": c.passage.id, "doc_id": c.passage.doc_id, "lang": c.lang,
             "source_lang": c.passage.lang, "translated": c.translated, "text": c.text} for c in answer.citations]


def usage(answer: Answer) -> dict[str, int]:
    prompt = sum(c.prompt_tokens for c in answer.trace.llm_calls)
    completion = sum(c.completion_tokens for c in answer.trace.llm_calls)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def finish_reason(answer: Answer, limit: int) -> str:
    """"length" when the answer was cut, by its token budget or by the deadline (a client then knows the
    text is incomplete; OpenAI's reasons have no word for a deadline), else "stop"."""
    generated = [c for c in answer.trace.llm_calls if c.role == "generator"]
    return "length" if generated and generated[-1].ended_early(limit) else "stop"


router = APIRouter(dependencies=[Depends(reader)])


@router.get("/v1/models")
async def models(service: Service = Depends(service_of)) -> Response:
    def listing() -> Response:
        out = []
        for kb in service.store.list():
            try:
                tuned = bool(service.kb(kb).manifest.get("profile"))
            except BabelragError:  # one broken or foreign collection does not hide the others (as /kbs)
                continue
            out += [{"id": kb if p == DEFAULT_PRESET else f"{kb}:{p}", "object": "model", "owned_by": "babelrag",
                     "created": 0} for p in (*LISTED_PRESETS, *(["tuned"] if tuned else []))]
        return rendered({"object": "list", "data": out})
    return await run(service.timeout, listing)


@router.post("/v1/chat/completions", response_model=None, dependencies=[Depends(limited)],
             openapi_extra={"requestBody": {"required": True, "content": {
                 "application/json": {"schema": ChatBody.model_json_schema()}}}})
async def chat(request: Request, service: Service = Depends(service_of)) -> Response:
    body = await parsed(request, ChatBody, CHAT)
    kb, preset = body.target()
    if not re.fullmatch(KB_PATTERN, kb) or not await run(service.timeout, lambda: service.store.exists(kb)):
        raise HTTPException(404, "model: no such knowledge base (GET /v1/models lists them)")
    settings = {"answer_tokens": min(body.max_tokens, LIMITS["answer_tokens"])} if body.max_tokens else {}
    try:  # the same bounds as /ask
        config = SearchBody(kb=kb, question=body.question(), country=body.country, preset=preset,
                            settings=settings).config(service.llm, service.defaults, service.timeout)
    except BabelragError as error:
        raise HTTPException(400, f"model: {public(str(error))}") from error
    except ValidationError as error:  # the preset part of the model name
        first = problems(error.errors(include_url=False, include_input=False))[0]
        raise HTTPException(400, f"model: {'.'.join(map(str, first['loc']))}: {first['msg']}") from error
    question = Question(body.question(), lang=body.lang, country=body.country)
    head = {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "created": int(time.time()), "model": body.model}
    if not body.stream:
        def work() -> Response:
            with service.gate.enter():
                answer = Answerer(service.kb(kb), config).ask(question)
            return rendered({**head, "object": "chat.completion", "usage": usage(answer),
                             "choices": [{"index": 0, "finish_reason": finish_reason(answer, config.answer_tokens),
                                          "message": {"role": "assistant", "content": cited_text(answer)}}],
                             "citations": citations(answer), "warnings": answer.trace.warnings()})
        return await run(service.timeout, work, request)

    def streamed(emit: Emit) -> None:
        with service.gate.enter():
            emit("answer", Answerer(service.kb(kb), config).ask(question, on_text=lambda t: emit("text", t)))

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        data = {**head, "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
        return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"

    async def stream() -> AsyncIterator[str]:
        yield chunk({"role": "assistant", "content": ""})
        async for kind, data in events_of(streamed, service.timeout):
            if kind == "text":
                yield chunk({"content": data})
            elif kind == "answer":
                tail = cited_text(data)[len(data.text):]  # attributed citations, appended
                yield chunk({"content": tail} if tail else {}, finish_reason(data, config.answer_tokens),
                            usage=usage(data), citations=citations(data), warnings=data.trace.warnings())
            else:  # an error, as OpenAI streams report one: the stream ends without a finish_reason
                yield f"data: {json.dumps({'error': {'code': data.status_code, 'message': data.detail}})}\n\n"
        yield "data: [DONE]\n\n"

    return StreamingResponse(stream(), media_type="text/event-stream")
