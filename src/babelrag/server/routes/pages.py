"""Health, the web page, and the API's own documentation.

``/openapi.json``, ``/docs`` and ``/redoc`` are reads like any other: behind the read key when the
service has read keys (FastAPI serves them to anyone by default).
"""
from __future__ import annotations

from importlib.resources import files
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse

from babelrag import __version__
from babelrag.server.access import reader

router = APIRouter()
docs = APIRouter(dependencies=[Depends(reader)], include_in_schema=False)


@router.get("/health")
def health() -> dict[str, Any]:
    return {"status": "ok", "version": __version__}


@router.get("/", response_class=HTMLResponse)
def page() -> HTMLResponse:
    return HTMLResponse(files("babelrag.server").joinpath("static/index.html").read_text(encoding="utf-8"))


@docs.get("/openapi.json")
def openapi(request: Request) -> JSONResponse:
    return JSONResponse(request.app.openapi())


@docs.get("/docs")
def swagger() -> HTMLResponse:
    return get_swagger_ui_html(openapi_url="/openapi.json", title="babelrag API")


@docs.get("/redoc")
def redoc() -> HTMLResponse:
    return get_redoc_html(openapi_url="/openapi.json", title="babelrag API")
