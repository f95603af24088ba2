"""Run folders (``babelrag eval`` / ``bench`` output) and their cell reports, for readers.

A run id is one path segment of safe characters naming a folder right under the runs folder; a
damaged run is refused with a public message (``RunUnreadable``), never a 500.
"""
from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, Depends, HTTPException
from fastapi.responses import HTMLResponse

from babelrag.server.access import reader, service_of
from babelrag.server.service import Service
from babelrag.server.streaming import run

router = APIRouter(dependencies=[Depends(reader)])
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


@router.get("/runs")
def runs(service: Service = Depends(service_of)) -> list[dict[str, Any]]:
    if not service.runs.is_dir():
        return []
    return [{"id": folder.name, "complete": (folder / "COMPLETE").exists()}
            for folder in sorted(service.runs.iterdir()) if (folder / "metrics.json").is_file()]


@router.get("/runs/{run_id}/report", response_class=HTMLResponse)
async def run_report(run_id: str, service: Service = Depends(service_of)) -> HTMLResponse:
    folder = service.runs / run_id
    if not RUN_ID.fullmatch(run_id) or folder.resolve().parent != service.runs.resolve() or not folder.is_dir():
        raise HTTPException(404, "no such run")
    from babelrag.evaluate.report import html, load_summary

    return HTMLResponse(await run(service.timeout, lambda: html(load_summary([folder]))))
