"""Knowledge bases: the listing (any reader), adding and deleting documents (a write key).

A broken KB is one broken KB: the listing shows it as a warning entry and goes on. Documents are read
only after the write key was checked, decoded under the documents budget off the event loop, and
written all or nothing (``ingest/pipeline.py``); deletion goes through ``KnowledgeBase.delete``.
"""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request, Response

from babelrag.config import PRESETS
from babelrag.errors import BabelragError
from babelrag.ingest.pipeline import IngestOptions, index_records
from babelrag.ingest.readers import RawRecord
from babelrag.ingest.records import Defaults, validate_all
from babelrag.server.access import reader, service_of, writer
from babelrag.server.bodies import DOCUMENTS, BodyRefused, decode, read
from babelrag.server.schemas import country_code
from babelrag.server.service import Service
from babelrag.server.streaming import refusal, rendered, run
from babelrag.store.schema import check_kb_name

router = APIRouter()
MAX_DOCUMENTS = 10_000


def listing(service: Service) -> list[dict[str, Any]]:
    """Every KB with its size and language mix; one that cannot be opened is a warning entry."""
    out = []
    for name in service.store.list():
        try:
            manifest = service.kb(name).manifest
        except BabelragError as error:
            out.append({"kb": name, "warning": f"unreadable: {refusal(error).detail}"})
            continue
        out.append({"kb": name, "passages": manifest.passages, "documents": manifest.documents,
                    "languages": manifest.languages.all, "countries": sorted(manifest.languages.countries)})
    return out


@router.get("/presets", dependencies=[Depends(reader)])
def presets() -> list[str]:
    return list(PRESETS)


@router.get("/kbs", dependencies=[Depends(reader)])
async def kbs(service: Service = Depends(service_of)) -> Response:
    return await run(service.timeout, lambda: rendered(listing(service)))


def documents_of(raw: bytes, content_type: str) -> list[dict[str, Any]]:
    """A JSON array, ``{"documents": [...]}`` or JSONL; each row a record (countries as ISO codes)."""
    if "ndjson" in content_type or "jsonl" in content_type:
        rows = decode(raw, DOCUMENTS, jsonl=True)
    else:
        payload = decode(raw, DOCUMENTS)
        rows = payload.get("documents", [payload]) if isinstance(payload, dict) else payload
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise BodyRefused(400, "expected a JSON array of documents, {\"documents\": [...]}, or JSONL")
    if len(rows) > MAX_DOCUMENTS:
        raise BodyRefused(413, f"at most {MAX_DOCUMENTS:,} documents per request")
    for number, row in enumerate(rows, start=1):
        if "metadata" in row and not isinstance(row["metadata"], dict):
            raise BodyRefused(400, f"request:{number}: field 'metadata': expected an object")
        if row.get("country") not in (None, ""):
            try:
                row["country"] = country_code(row["country"])
            except ValueError as error:
                raise BodyRefused(400, f"request:{number}: field 'country': {error}") from None
    return rows


@router.post("/kbs/{kb}/documents", dependencies=[Depends(writer)])
async def add_documents(kb: str, request: Request, service: Service = Depends(service_of)) -> Response:
    try:
        check_kb_name(kb)
    except BabelragError as error:
        raise HTTPException(400, str(error)) from error
    raw = await read(request, DOCUMENTS)
    content_type = request.headers.get("content-type", "")

    def work() -> Response:
        rows = documents_of(raw, content_type)
        records = validate_all((RawRecord(r, "request", i) for i, r in enumerate(rows, start=1)), Defaults())
        with service.writing(kb, adding=True):
            handle = service.kb(kb) if service.store.exists(kb) else None
            report = index_records(kb, records, service.store, IngestOptions(), kb=handle)
        return rendered({"kb": kb, "documents": report.documents, "passages": report.passages,
                         "languages": report.languages})
    return await run(service.timeout, work, write=True)


@router.delete("/kbs/{kb}/documents/{record_id:path}", dependencies=[Depends(writer)])  # ids may hold "/"
async def delete_document(kb: str, record_id: str, service: Service = Depends(service_of)) -> Response:
    def work() -> Response:
        with service.writing(kb):
            removed = service.kb(kb).delete(ids=[record_id])
        if not removed:
            raise HTTPException(404, f"no such document in '{kb}'")
        return rendered({"kb": kb, "deleted": record_id, "passages": removed})
    return await run(service.timeout, work, write=True)
