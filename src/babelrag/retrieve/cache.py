"""A persistent cache of retrieval candidates keyed by (index, request, retrieval settings).

It stores each arm's (passage id, score) list, before fusion and reranking, so sweeps over
fusions, rerankers and thresholds reuse one retrieval. The index part of the key is the
manifest's identity (components, update time, size): re-indexing invalidates it.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from babelrag.json_store import JsonStore, digest

if TYPE_CHECKING:
    from babelrag.config import SearchConfig
    from babelrag.kb import KnowledgeBase
    from babelrag.types import SearchRequest

# label, scorer, (passage id, score) in order, and whether the engine returned fewer than asked (complete)
CachedArm = tuple[str, str, list[tuple[str, float]], bool]
# what a key's arms mean; raised when the same request starts to retrieve something else (2: a copy path's
# language restriction is applied by the engine, no longer after retrieval; 3: each arm says if it is complete)
KEY_VERSION = 3


class RetrievalCache:
    def __init__(self, path: Path):
        self._store = JsonStore(path, "arms")
        self.hits = self.misses = 0

    @staticmethod
    def key(kb: KnowledgeBase, request: SearchRequest, config: SearchConfig, centred: int = 0) -> str:
        """``centred``: the centred arm's limit, when the search adds one (``search.retrieve``)."""
        return digest({"version": KEY_VERSION, **kb.identity(), "text": request.text, "lang": request.lang,
                       "segments": request.segments,
                       "filter": repr(request.filter), "mode": config.mode, "candidates": config.candidates,
                       **({"centred": centred} if centred else {}), **_copies_identity(kb, request)})

    def get(self, key: str) -> list[CachedArm] | None:
        stored = self._store.get(key)
        if stored is None:
            self.misses += 1
            return None
        self.hits += 1
        return [(label, scorer, [(pid, float(score)) for pid, score in hits], complete is True)
                for label, scorer, hits, complete in stored]

    def put(self, key: str, arms: list[CachedArm]) -> None:
        self._store.put(key, arms)


def _copies_identity(kb: KnowledgeBase, request: SearchRequest) -> dict[str, object]:
    """A pivot-copy path's key also names the copies' last update (making them again invalidates it)."""
    if request.index == "passages":
        return {}
    record = kb.manifest.pivot_copies
    return {"index": request.index, "copies": record.updated_at if record else None}
