"""A Haystack component: babelrag's multilingual retrieval as a pipeline's retriever.

    from haystack import Pipeline
    from babelrag.integrations.haystack import BabelragRetriever

    pipeline = Pipeline()
    pipeline.add_component("retriever", BabelragRetriever(kb="faq", preset="learned", top_k=5))
    pipeline.run({"retriever": {"query": "Var köper jag receptfria läkemedel?", "country": "SE"}})

It returns Haystack ``Document``s (id = passage id, score, ``meta`` with lang, country, doc_id…). The KB
opens at ``warm_up`` (or the first run); its init parameters are plain values, so a pipeline holding it
serializes to YAML and back.
"""
from __future__ import annotations

import threading
from typing import Any

from haystack import Document, component

from babelrag.api import KB, open_kb
from babelrag.integrations import hit_metadata


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
    def run(self, query: str, country: str | None = None, lang: str | None = None,
            top_k: int | None = None) -> dict[str, list[Document]]:
        """``lang``: the question's language when known (detected otherwise)."""
        result = self._open().search(query, preset=self.preset, country=country or self.country, lang=lang,
                                     k=top_k or self.top_k, settings=self.settings)
        return {"documents": [Document(id=h.passage.id, content=h.passage.text, score=float(h.score),
                                       meta=hit_metadata(h)) for h in result.evidence.hits]}

    def close(self) -> None:
        """Release the KB (its shard closes with the process's last handle)."""
        with self._lock:
            if self._handle is not None:
                self._handle.close()
                self._handle = None
