"""Haystack components: babelrag's multilingual retrieval as a pipeline's retriever, and a writer that
indexes Haystack ``Document``s into a KB.

    from haystack import Pipeline
    from babelrag.integrations.haystack import BabelragDocumentWriter, BabelragRetriever

    BabelragDocumentWriter(kb="faq").run(documents=[Document(content="Apoteket …", meta={"country": "SE"})])
    pipeline = Pipeline()
    pipeline.add_component("retriever", BabelragRetriever(kb="faq", preset="learned", top_k=5))
    pipeline.run({"retriever": {"query": "Var köper jag receptfria läkemedel?", "country": "SE",
                                "filters": {"field": "meta.lang", "operator": "in", "value": ["sv", "en"]}}})

The retriever returns ``Document``s (id = passage id, score, ``meta`` with lang, country, doc_id…);
``run_async`` serves ``AsyncPipeline`` without blocking its event loop. ``filters`` are Haystack's syntax
over ``meta.country``, ``meta.lang``, ``meta.scope`` and ``meta.doc_id``, joined by AND (the policy:
``babelrag.integrations.selection``). The KB opens at ``warm_up`` (or the first run); init parameters are
plain values, so a pipeline holding either component serializes to YAML and back.
"""
from __future__ import annotations

import asyncio
import threading
from typing import Any

from haystack import Document, component

import babelrag
from babelrag.api import KB, open_kb
from babelrag.integrations import hit_metadata, record_of
from babelrag.integrations.selection import Selection, haystack_conditions, search_selected, selection_of


@component
class BabelragRetriever:
    """``preset`` and ``settings`` are babelrag's (``babelrag.PRESETS``; any ``SearchConfig`` field);
    ``country`` filters to that country plus global passages unless a run gives its own."""

    def __init__(self, kb: str, store: str | None = None, preset: str = "default", top_k: int = 10,
                 country: str | None = None, settings: dict[str, Any] | None = None):
        self.kb, self.store, self.preset, self.top_k, self.country = kb, store, preset, top_k, country
        self.settings = dict(settings or {})
        self._handle: KB | None = None
        self._lock = threading.Lock()

    def warm_up(self) -> None:
        self._open()

    def _open(self) -> KB:
        with self._lock:
            if self._handle is None:
                self._handle = open_kb(self.kb, self.store)
            return self._handle

    @component.output_types(documents=list[Document])
    def run(self, query: str, country: str | None = None, lang: str | None = None, top_k: int | None = None,
            filters: dict[str, Any] | None = None) -> dict[str, list[Document]]:
        """``lang``: the question's language when known (detected otherwise); ``filters``: Haystack's."""
        selection = selection_of(haystack_conditions(filters)) if filters else Selection()
        hits = search_selected(self._open(), query, selection, k=top_k or self.top_k, settings=self.settings,
                               preset=self.preset, country=country or self.country, lang=lang)
        return {"documents": [Document(id=h.passage.id, content=h.passage.text, score=float(h.score),
                                       meta=hit_metadata(h)) for h in hits]}

    @component.output_types(documents=list[Document])
    async def run_async(self, query: str, country: str | None = None, lang: str | None = None,
                        top_k: int | None = None, filters: dict[str, Any] | None = None) -> dict[str, list[Document]]:
        """``run`` on a worker thread: the pipeline's event loop never waits on the search."""
        return await asyncio.to_thread(self.run, query, country, lang, top_k, filters)

    def close(self) -> None:
        """Release the KB (its shard closes with the process's last handle)."""
        with self._lock:
            if self._handle is not None:
                self._handle.close()
                self._handle = None


@component
class BabelragDocumentWriter:
    """Indexes ``Document``s into ``kb`` (created on first write): ``id`` and ``content``, and from ``meta``
    the fields babelrag knows (lang, country, scope, title, doc_id, source; the rest kept as metadata).
    A document with the id of one already indexed replaces it, as babelrag's index does; all or nothing."""

    def __init__(self, kb: str, store: str | None = None, lang: str | None = None, country: str | None = None):
        self.kb, self.store, self.lang, self.country = kb, store, lang, country

    @component.output_types(documents_written=int)
    def run(self, documents: list[Document]) -> dict[str, int]:
        records = [record_of(d.id, d.content or "", d.meta) for d in documents]
        if not records:
            return {"documents_written": 0}
        report = babelrag.index(self.kb, records, self.store, lang=self.lang, country=self.country)
        return {"documents_written": report.documents}
