"""babelrag as the retriever inside the frameworks people already use (optional extras, thin over the
public API in ``babelrag.api``): ``babelrag.integrations.haystack`` (``pip install 'babelrag[haystack]'``)
and ``babelrag.integrations.llama_index`` (``pip install 'babelrag[llama-index]'``)."""
from __future__ import annotations

from typing import Any

from babelrag.types import Hit


def hit_metadata(hit: Hit) -> dict[str, Any]:
    """What a framework document carries besides text and score: where the passage came from and which
    of babelrag's paths found it (``path``), so a downstream filter or prompt can use the language."""
    p = hit.passage
    return {**dict(p.metadata), "doc_id": p.doc_id, "lang": p.lang, "country": p.country, "scope": p.scope,
            "title": p.title, "source": p.source, "record_id": p.record_id, "chunk": p.chunk, "path": hit.path}
