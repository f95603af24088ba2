"""Request bodies, read only after the key was checked and decoded under a budget, off the event loop.

FastAPI would read and parse a body before any dependency runs (an unauthenticated client could make
the server parse megabytes), parse it on the event loop, and answer a bad one by echoing the whole
input back, serialised on the loop as well: one 3-million-element array held every request for 10 s.
Here a route reads its own body after its key dependency passed; the size is capped per route, and
the number of JSON values is bounded by a count of the structural bytes before anything is parsed
(``json.loads`` holds the GIL for the whole parse: 1 M empty lists take ~150 ms, so the budget keeps one
parse to a few tens of ms). Decoding refuses what no field can hold — a lone surrogate, NaN, ±Infinity,
a float out of range (``1e999``), an integer past 64 bits, nesting deeper than ``MAX_DEPTH`` — naming
the field, never quoting the input. Validation errors say where and what, without the input either.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import HTTPException, Request
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool

MAX_DEPTH = 20  # JSON nesting any body may have
Model = TypeVar("Model", bound=BaseModel)


@dataclass(frozen=True)
class Budget:
    """What one route reads at most: bytes, and JSON values (commas, colons and opening brackets)."""

    bytes: int
    values: int


QUESTION = Budget(64 << 10, 4_000)  # a search or ask: a question of ≤ 2,000 characters and a few settings
CHAT = Budget(1 << 20, 40_000)  # an OpenAI chat: up to 200 messages of history
DOCUMENTS = Budget(10 << 20, 400_000)  # 10,000 documents with their fields; prose commas count too


class BodyRefused(HTTPException):
    """A body refused before it reached its model (400), too large (413)."""


def location(path: tuple[Any, ...]) -> str:
    """Where in the body: field names (a client's own ones cut to 64 characters) and list positions."""
    return ".".join(str(part)[:64] for part in path) or "body"


def check_values(value: Any, path: tuple[Any, ...] = ()) -> None:
    """Refuse, naming the field, what decoding let through and no field can use: lone surrogates (in
    keys too), non-finite floats (``1e999`` decodes to infinity), integers past 64 bits, deep nesting."""
    if len(path) > MAX_DEPTH:
        raise BodyRefused(400, f"{location(path[:MAX_DEPTH])}: nested too deeply (at most {MAX_DEPTH} levels)")
    if isinstance(value, str):
        _text(value, path)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise BodyRefused(400, f"{location(path)}: not a finite number")
    elif isinstance(value, int) and not isinstance(value, bool):
        if not -2 ** 63 <= value < 2 ** 63:
            raise BodyRefused(400, f"{location(path)}: an integer past 64 bits")
    elif isinstance(value, dict):
        for key, item in value.items():
            _text(key, (*path, "<key>"))
            check_values(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_values(item, (*path, index))


def _text(value: str, path: tuple[Any, ...]) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise BodyRefused(400, f"{location(path)}: holds a lone surrogate (not Unicode text)") from None


def decode(raw: bytes, budget: Budget, jsonl: bool = False) -> Any:
    """The body's JSON value (``jsonl``: the list of its lines' values), or a ``BodyRefused``. CPU-bound:
    call it in a worker thread."""
    if len(raw) > budget.bytes:
        raise BodyRefused(413, f"body over {budget.bytes} bytes for this endpoint")
    values = raw.count(b",") + raw.count(b":") + raw.count(b"[") + raw.count(b"{")
    if values > budget.values:
        raise BodyRefused(413, f"body holds too many JSON values for this endpoint (at most {budget.values:,})")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BodyRefused(400, "body is not UTF-8") from None
    if jsonl:
        rows = [_loads(line, f"line {number}") for number, line in enumerate(text.splitlines(), start=1)
                if line.strip()]
        check_values(rows)
        return rows
    value = _loads(text, "body")
    check_values(value)
    return value


def _loads(text: str, where: str) -> Any:
    try:
        return json.loads(text)  # NaN and ±Infinity decode to floats: check_values refuses them by field
    except json.JSONDecodeError as error:
        raise BodyRefused(400, f"{where}: invalid JSON ({error.msg} at line {error.lineno}, column "
                               f"{error.colno})") from None
    except RecursionError:
        raise BodyRefused(400, f"{where}: nested too deeply (at most {MAX_DEPTH} levels)") from None
    except ValueError:  # an integer of thousands of digits (Python's own limit, whose message names sys.*)
        raise BodyRefused(400, f"{where}: a number with too many digits") from None


async def read(request: Request, budget: Budget) -> bytes:
    """The raw body, refused (413) as soon as it passes the budget: a declared length is believed first."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > budget.bytes:
        raise BodyRefused(413, f"body over {budget.bytes} bytes for this endpoint")
    chunks, seen = [], 0
    async for chunk in request.stream():
        seen += len(chunk)
        if seen > budget.bytes:
            raise BodyRefused(413, f"body over {budget.bytes} bytes for this endpoint")
        chunks.append(chunk)
    return b"".join(chunks)


def problems(errors: list[Any]) -> list[dict[str, Any]]:
    """Validation errors (pydantic's or FastAPI's) as clients see them: where and what, never the input
    (field names a client invented are cut to 64 characters)."""
    return [{"loc": [part if isinstance(part, int) else str(part)[:64] for part in item["loc"]], "msg": item["msg"],
             "type": item["type"]} for item in errors]


async def parsed(request: Request, model: type[Model], budget: Budget = QUESTION) -> Model:
    """The body as ``model``: read under ``budget``, then decoded and validated in a worker thread."""
    raw = await read(request, budget)

    def build() -> Model:
        value = decode(raw, budget)
        try:
            return model.model_validate(value)
        except ValidationError as error:
            raise HTTPException(422, problems(error.errors(include_url=False, include_input=False))) from None
    return await run_in_threadpool(build)
