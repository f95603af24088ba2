"""babelrag inside the frameworks people already use (optional extras, thin over the public API in
``babelrag.api``): ``babelrag.integrations.haystack`` (``pip install 'babelrag[haystack]'``) and
``babelrag.integrations.llama_index`` (``pip install 'babelrag[llama-index]'``). What both share — a
framework document's metadata, a framework record turned into a babelrag record, metadata filters
(``selection.py``) — lives here, so the two cannot drift apart."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from babelrag.types import Hit

# where a passage sits in babelrag's bookkeeping: kept in the metadata for code, out of a model's text
BOOKKEEPING = ("path", "record_id", "chunk", "source", "doc_id", "scope")
RECORD_FIELDS = ("lang", "country", "scope", "title", "doc_id", "source")


def hit_metadata(hit: Hit) -> dict[str, Any]:
    """What a framework document carries besides text and score: where the passage came from and which
    of babelrag's paths found it (``path``), so a downstream filter or prompt can use the language."""
    p = hit.passage
    return {**dict(p.metadata), "doc_id": p.doc_id, "lang": p.lang, "country": p.country, "scope": p.scope,
            "title": p.title, "source": p.source, "record_id": p.record_id, "chunk": p.chunk, "path": hit.path}


def record_of(record_id: str, text: str, meta: Mapping[str, Any]) -> dict[str, Any]:
    """A framework document as a babelrag record: its id and text, the fields babelrag knows by name, the
    rest as metadata (a document babelrag itself returned loses its retrieval bookkeeping)."""
    meta = {k: v for k, v in meta.items() if k not in ("path", "record_id", "chunk") and v is not None}
    known = {k: meta.pop(k) for k in RECORD_FIELDS if k in meta}
    return {"id": record_id, "text": text, **known, "metadata": meta}
