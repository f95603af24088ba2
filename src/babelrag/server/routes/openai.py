"""An OpenAI-compatible chat endpoint: any chat UI or SDK that speaks chat-completions can ask a KB.

``model`` names a KB and a preset: ``xquad-dev`` (MultiRAG), ``xquad-dev:chat``, ``xquad-dev:learned``…
(``GET /v1/models`` lists every usable one, ``GET /v1/models/{id}`` names one). The question is the **last
user message**, its language detected (or ``lang`` given beside the messages, as ``country`` may be). With
earlier user or assistant turns the question is first rewritten to stand alone, in the user's language
(``generate/conversation.py``: "Och i Polen?" after a question about Sweden asks about Poland); system
messages are not read. The answer cites its passages as [n] in the text, and the passages travel in the
extra field ``citations`` (number, id, doc_id, lang, source_lang, translated, text) — in the last chunk
when streamed — with ``warnings`` for any model failure on the way. Parameters this endpoint cannot
honour (``n`` > 1, ``tools``, a ``response_format`` other than text, ``logprobs``, more ``max_tokens``
than the server allows) are refused with a 400 naming the parameter, and every error is OpenAI's shape
(``openai_errors.py``). Auth, rate limits, body budgets, deadlines and the LLM gate are those of ``/ask``.
"""
from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any, Literal

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from babelrag.config import PRESETS, SearchConfig
from babelrag.errors import BabelragError
from babelrag.generate.answerer import Answerer
from babelrag.generate.conversation import Turn, turns_of
from babelrag.server.access import limited, reader, service_of
from babelrag.server.bodies import CHAT, parsed, problems
from babelrag.server.openai_errors import OpenAIError, shaped
from babelrag.server.routes.answers import door
from babelrag.server.schemas import KB_PATTERN, LIMITS, SearchBody, country_code, language_code
from babelrag.server.service import Service
from babelrag.server.streaming import Emit, events_of, public, rendered, run
from babelrag.types import Answer

DEFAULT_PRESET = "multirag"
COMPOSED_PRESETS = ("delta+crossrag",)  # listed beside the named presets: the papers' full pipeline
UNSUPPORTED = "unsupported_parameter"


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
    stream_options: dict[str, Any] | None = None
    max_tokens: int | None = Field(None, ge=1, strict=True)
    max_completion_tokens: int | None = Field(None, ge=1, strict=True)  # the newer name of max_tokens
    # what this endpoint cannot honour: refused by name (``refuse_unsupported``), never silently ignored
    n: int | None = Field(None, ge=1, strict=True)
    tools: list[Any] | None = None
    functions: list[Any] | None = None
    tool_choice: Any = None
    response_format: dict[str, Any] | None = None
    logprobs: bool | None = None
    country: str | None = None
    lang: str | None = None

    @field_validator("country")
    @classmethod
    def _iso_country(cls, value: str | None) -> str | None:
        return country_code(value)

    @field_validator("lang")
    @classmethod
    def _iso_language(cls, value: str | None) -> str | None:
        return language_code(value)

    def answer_tokens(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens

    def refuse_unsupported(self) -> None:
        """A 400 naming the first parameter whose meaning this endpoint cannot give."""
        for name, refused, why in (
                ("n", (self.n or 1) > 1, "one choice per request"),
                ("tools", bool(self.tools), "no tool calls: answers come from the knowledge base"),
                ("functions", bool(self.functions), "no function calls: answers come from the knowledge base"),
                ("tool_choice", self.tool_choice not in (None, "none"), "no tool calls"),
                ("response_format", (self.response_format or {}).get("type", "text") != "text",
                 "answers are text with citations"),
                ("logprobs", bool(self.logprobs), "no log probabilities")):
            if refused:
                raise OpenAIError(400, f"{name}: not supported ({why})", param=name, code=UNSUPPORTED)
        for name in ("max_tokens", "max_completion_tokens"):
            if (getattr(self, name) or 0) > LIMITS["answer_tokens"]:
                raise OpenAIError(400, f"{name}: at most {LIMITS['answer_tokens']} on this server", param=name,
                                  code=UNSUPPORTED)

    def target(self) -> tuple[str, str]:
        kb, _, preset = self.model.partition(":")
        return kb, preset or DEFAULT_PRESET

    def question(self) -> str:
        """The last user message: what is asked."""
        users = [m for m in self.messages if m.role == "user" and m.text().strip()]
        if not users:
            raise OpenAIError(400, "messages: no user message with text (the last one is the question)",
                              param="messages")
        text = users[-1].text().strip()
        if len(text) > 2000:
            raise OpenAIError(400, "messages: the question (last user message) is over 2,000 characters",
                              param="messages")
        return text

    def history(self) -> list[Turn]:
        """The user and assistant turns before the last user message (what a follow-up refers to)."""
        last = max(i for i, m in enumerate(self.messages) if m.role == "user" and m.text().strip())
        return turns_of({"role": m.role, "content": m.text()} for m in self.messages[:last])


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



def usable_presets(service: Service, tuned: bool) -> list[str]:
    """The presets a client can chat with here: each named one (and the composed ones) whose configuration
    this server accepts for a client, ``tuned`` only for a KB with a profile."""
    usable = []
    for preset in dict.fromkeys((DEFAULT_PRESET, "chat", *COMPOSED_PRESETS, *PRESETS)):  # the usual ones first
        if preset == "tuned" and not tuned:
            continue
        try:
            SearchBody(kb="kb", question="?", preset=preset).config(service.llm, service.defaults, service.timeout)
        except (BabelragError, ValidationError):
            continue
        usable.append(preset)
    return usable


def model_card(kb: str, preset: str) -> dict[str, Any]:
    return {"id": kb if preset == DEFAULT_PRESET else f"{kb}:{preset}", "object": "model", "owned_by": "babelrag",
            "created": 0}


router = APIRouter(dependencies=[Depends(reader)])


def _not_found(what: str) -> OpenAIError:
    return OpenAIError(404, f"model: {what} (GET /v1/models lists them)", param="model", code="model_not_found")


def _config(service: Service, body_model: str, settings: dict[str, Any] | None = None,
            country: str | None = None) -> tuple[str, SearchConfig]:
    """The KB and configuration a model name stands for, or the 404 a missing model gets."""
    kb, _, preset = body_model.partition(":")
    if not re.fullmatch(KB_PATTERN, kb) or not service.store.exists(kb):
        raise _not_found("no such knowledge base")
    try:
        return kb, SearchBody(kb=kb, question="?", country=country, preset=preset or DEFAULT_PRESET,
                              settings=settings or {}).config(service.llm, service.defaults, service.timeout)
    except BabelragError as error:
        raise _not_found(public(str(error))) from error
    except ValidationError as error:  # the preset part of the model name
        first = problems(error.errors(include_url=False, include_input=False))[0]
        raise _not_found(f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from error


@router.get("/v1/models")
async def models(service: Service = Depends(service_of)) -> Response:
    def listing() -> Response:
        out = []
        for kb in service.store.list():
            try:
                tuned = bool(service.kb(kb).manifest.profile)
            except BabelragError:  # one broken or foreign collection does not hide the others (as /kbs)
                continue
            out += [model_card(kb, p) for p in usable_presets(service, tuned)]
        return rendered({"object": "list", "data": out})
    return await run(service.timeout, listing)


@router.get("/v1/models/{model_id}")
async def model(model_id: str, service: Service = Depends(service_of)) -> Response:
    def card() -> Response:
        kb, _ = _config(service, model_id)
        preset = model_id.partition(":")[2] or DEFAULT_PRESET
        if preset == "tuned" and not service.kb(kb).manifest.profile:
            raise _not_found("this knowledge base has no tuned profile (babelrag tune)")
        return rendered(model_card(kb, preset))
    return await run(service.timeout, card)


@router.post("/v1/chat/completions", response_model=None, dependencies=[Depends(limited)],
             openapi_extra={"requestBody": {"required": True, "content": {
                 "application/json": {"schema": ChatBody.model_json_schema()}}}})
async def chat(request: Request, service: Service = Depends(service_of)) -> Response:
    body = await parsed(request, ChatBody, CHAT)
    body.refuse_unsupported()
    question, history = body.question(), body.history()
    tokens = body.answer_tokens()
    kb, config = await run(service.timeout, lambda: _config(service, body.model, {"answer_tokens": tokens}
                                                             if tokens else None, body.country))
    search_body = SearchBody(kb=kb, question=question, lang=body.lang, country=body.country)
    head = {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "created": int(time.time()), "model": body.model}

    def answered(on_text: Any = None) -> Answer:
        handle = service.kb(kb)
        checked = door(search_body, config, handle)
        with service.gate.enter():
            answer = Answerer(handle, checked.config).ask(checked.question, on_text=on_text, history=history)
        checked.noted(answer.trace)
        return answer

    if not body.stream:
        def work() -> Response:
            answer = answered()
            return rendered({**head, "object": "chat.completion", "usage": usage(answer),
                             "choices": [{"index": 0, "finish_reason": finish_reason(answer, config.answer_tokens),
                                          "logprobs": None,
                                          "message": {"role": "assistant", "content": cited_text(answer)}}],
                             "citations": citations(answer), "warnings": answer.trace.warnings()})
        return await run(service.timeout, work, request)

    def streamed(emit: Emit) -> None:
        emit("answer", answered(lambda t: emit("text", t)))

    usage_chunk = bool((body.stream_options or {}).get("include_usage"))

    def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> str:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
        data = {**head, "object": "chat.completion.chunk", "choices": choices, **extra}
        return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"

    async def stream() -> AsyncIterator[str]:
        yield chunk({"role": "assistant", "content": ""})
        async for kind, data in events_of(streamed, service.timeout):
            if kind == "text":
                yield chunk({"content": data})
            elif kind == "answer":
                tail = cited_text(data)[len(data.text):]  # attributed citations, appended
                counted = usage(data)
                # OpenAI's include_usage: a last chunk with no choices carries the usage; otherwise it rides
                # on the finishing chunk (clients that do not ask for it ignore the field)
                yield chunk({"content": tail} if tail else {}, finish_reason(data, config.answer_tokens),
                            citations=citations(data), warnings=data.trace.warnings(),
                            **({} if usage_chunk else {"usage": counted}))
                if usage_chunk:
                    yield chunk(None, usage=counted)
            else:  # an error, as OpenAI streams report one: the stream ends without a finish_reason
                yield f"data: {json.dumps(shaped(data), ensure_ascii=False)}\n\n"
        yield "data: [DONE]\n\n"

    return StreamingResponse(stream(), media_type="text/event-stream")
