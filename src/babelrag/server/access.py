"""Who may do what: keys, rate limits and the service a route works on, as FastAPI dependencies.

Routes declare them in ``dependencies=[...]``; they run before a route reads its body (``bodies.py``),
so a client without a key is refused before anything it sent is parsed.
"""
from __future__ import annotations

import hmac

from fastapi import Depends, HTTPException, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from babelrag.server.service import Service

_key_header = APIKeyHeader(name="X-API-Key", auto_error=False)
_bearer = HTTPBearer(auto_error=False)  # how OpenAI clients send their api_key


def service_of(request: Request) -> Service:
    return request.app.state.service


def presented(header: str | None = Depends(_key_header),
              token: HTTPAuthorizationCredentials | None = Depends(_bearer)) -> str | None:
    return header or (token.credentials if token else None)


def _valid(key: str | None, keys: frozenset[str]) -> bool:
    return key is not None and any(hmac.compare_digest(key.encode(), k.encode()) for k in keys)


def reader(key: str | None = Depends(presented), service: Service = Depends(service_of)) -> None:
    """Reads (the API's documentation too) need a key when the service has read keys; a write key reads."""
    if service.read_keys and not _valid(key, service.read_keys | service.api_keys):
        raise HTTPException(401, "a valid key is required (X-API-Key header or Authorization: Bearer)")


def writer(key: str | None = Depends(presented), service: Service = Depends(service_of)) -> None:
    if not service.api_keys:
        raise HTTPException(403, "writes are disabled: start the service with an API key")
    if not _valid(key, service.api_keys):
        raise HTTPException(401, "a valid X-API-Key header is required for writes")


def limited(request: Request, service: Service = Depends(service_of)) -> None:
    if not service.rate.allow(request.client.host if request.client else "?"):
        raise HTTPException(429, "too many requests from this client; slow down", headers={"Retry-After": "5"})
