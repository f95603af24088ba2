"""Errors on ``/v1`` as OpenAI's own: ``{"error": {"message", "type", "code", "param"}}``.

The official SDKs read that object: a ``{"detail": …}`` body left ``e.message == 'Error code: 404'`` and
``e.code``, ``e.type``, ``e.param`` empty. Every refusal under ``/v1`` — a route's, a dependency's (key,
rate limit), a body's (size, JSON, validation), an unknown path's, a streamed one — is shaped here, with
the status the rest of the service would give. Other routes keep their ``detail`` bodies.
"""
from __future__ import annotations

from typing import Any

from fastapi import HTTPException, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from babelrag.server.bodies import location, problems

PREFIX = "/v1/"
# OpenAI's type and code for each status babelrag answers with
KINDS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None), 401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", "writes_disabled"), 404: ("invalid_request_error", "not_found"),
    409: ("invalid_request_error", "not_ready"), 413: ("invalid_request_error", "request_too_large"),
    422: ("invalid_request_error", "invalid_value"), 429: ("rate_limit_error", "rate_limit_exceeded"),
    500: ("server_error", None), 503: ("server_error", "unavailable"), 504: ("server_error", "timeout"),
}


class OpenAIError(HTTPException):
    """A refusal that says which request parameter it is about (``param``) and why (``code``)."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None):
        super().__init__(status, message)
        self.param, self.code = param, code


def is_openai(path: str) -> bool:
    return path.startswith(PREFIX) or path == PREFIX.rstrip("/")


def error_body(status: int, detail: Any, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """The error object for a status and a detail (a message, or validation problems: the first one's
    field becomes ``param``)."""
    kind, default_code = KINDS.get(status, ("server_error" if status >= 500 else "invalid_request_error", None))
    if isinstance(detail, list) and detail:  # validation problems: where and what, never the input
        first = detail[0]
        param = param or location(tuple(first.get("loc", ())[1:] if first.get("loc", ("",))[0] == "body"
                                        else first.get("loc", ())))
        message = "; ".join(f"{location(tuple(p.get('loc', ())))}: {p.get('msg', '')}" for p in detail[:3])
    else:
        message = str(detail)
    return {"error": {"message": message, "type": kind, "code": code or default_code, "param": param}}


def shaped(error: HTTPException) -> dict[str, Any]:
    return error_body(error.status_code, error.detail, getattr(error, "param", None), getattr(error, "code", None))


async def on_http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
    if not is_openai(request.url.path):
        return await http_exception_handler(request, error)
    return JSONResponse(shaped(error), error.status_code, headers=getattr(error, "headers", None))


async def on_invalid(request: Request, error: RequestValidationError) -> JSONResponse:
    """Where and what, never the input: FastAPI's own handler echoes it (serialised on the event loop,
    and a lone surrogate in it turned a 422 into a 500)."""
    found = problems(error.errors())
    body = error_body(422, found) if is_openai(request.url.path) else {"detail": found}
    return JSONResponse(body, 422)


def refusal_body(path: str, status: int, message: str) -> dict[str, Any]:
    """A refusal made outside any route (the body ceiling), shaped for the path it was made on."""
    return error_body(status, message) if is_openai(path) else {"detail": message}
