"""Structured LLM output: schema-constrained when the backend can, validated always, repaired once.

Small models wander off the format; a clear error after one repair attempt beats silently
using half a JSON object. Every call, repair included, is recorded in the trace with its role.
"""
from __future__ import annotations

import json
import re
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from babelrag.models.llm import LLM, Completion, LLMError, Message
from babelrag.models.loops import loops
from babelrag.types import LLMCall, Trace

Model = TypeVar("Model", bound=BaseModel)
MAX_RETRY_TOKENS = 2048  # a doubled budget stays well inside a slot's context (8k)
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)


class StructuredOutputError(LLMError):
    pass


def record(trace: Trace | None, role: str, completion: Completion) -> None:
    if trace is not None:
        trace.llm_calls.append(LLMCall(role, completion.model, completion.prompt_tokens,
                                       completion.completion_tokens, completion.seconds, completion.cached,
                                       "stopped" if completion.stopped else completion.finish))


def _json_text(text: str) -> str:
    """The first JSON object in ``text`` (models like to wrap it in fences or prose)."""
    text = _FENCE.sub("", text.strip())
    start = text.find("{")
    if start < 0:
        return text
    depth, in_string, escaped = 0, False, False
    for i, char in enumerate(text[start:], start=start):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[start:i + 1]
    return text[start:]


def complete_json(llm: LLM, messages: list[Message], model: type[Model], *, role: str, trace: Trace | None,
                  max_tokens: int = 256, seed: int = 0) -> Model:
    schema = model.model_json_schema()
    completion = llm.complete(messages, json_schema=schema, max_tokens=max_tokens, seed=seed)
    record(trace, role, completion)
    try:
        return model.model_validate_json(_json_text(completion.text))
    except ValidationError as error:
        problem = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'object'}: {e['msg']}" for e in error.errors()[:3])
    # cut by its budget while making sense: the same budget would cut a repair turn too, so ask afresh with
    # twice the tokens; a cut loop would only loop longer (decoding is greedy), so it gets the repair turn
    cut = completion.cut(max_tokens) and not loops(completion.text, "") and max_tokens < MAX_RETRY_TOKENS
    budget = min(2 * max_tokens, MAX_RETRY_TOKENS) if cut else max_tokens
    if cut:
        repair = messages
    else:
        repair = [*messages, {"role": "assistant", "content": completion.text},
                  {"role": "user", "content": f"That is not valid ({problem}). Reply with only the corrected JSON "
                                              f"object matching this schema: {json.dumps(schema, ensure_ascii=False)}"}]
    retry = llm.complete(repair, json_schema=schema, max_tokens=budget, seed=seed + 1)
    record(trace, f"{role}:repair", retry)
    try:
        return model.model_validate_json(_json_text(retry.text))
    except ValidationError as error:
        how = f", cut at {max_tokens} then {budget} tokens" if cut else ""
        raise StructuredOutputError(f"{role}: {llm.name} returned invalid JSON twice{how} "
                                    f"({error.errors()[0]['msg']}): {retry.text[:200]!r}") from error
