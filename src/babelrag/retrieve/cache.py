"""A persistent cache of retrieval candidates keyed by (index, request, retrieval settings).

It stores each arm's (passage id, score) list, before fusion and reranking, so sweeps over
fusions, rerankers and thresholds reuse one retrieval. The index part of the key is the
manifest's identity (components, update time, size): re-indexing invalidates it.
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from babelrag.config import SearchConfig
    from babelrag.kb import KnowledgeBase
    from babelrag.types import SearchRequest

CachedArm = tuple[str, str, list[tuple[str, float]]]  # label, scorer, (passage id, score) in order


class RetrievalCache:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS arms (key TEXT PRIMARY KEY, value TEXT)")
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    @staticmethod
    def key(kb: KnowledgeBase, request: SearchRequest, config: SearchConfig) -> str:
        manifest = kb.manifest
        identity = {"kb": kb.name, "components": manifest.get("components"), "updated": manifest.get("updated_at"),
                    "passages": manifest.get("passages"), "text": request.text, "lang": request.lang,
                    "filter": repr(request.filter), "mode": config.mode, "candidates": config.candidates}
        return hashlib.sha256(json.dumps(identity, sort_keys=True, ensure_ascii=False).encode()).hexdigest()

    def get(self, key: str) -> list[CachedArm] | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM arms WHERE key = ?", (key,)).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        return [(label, scorer, [(pid, float(score)) for pid, score in hits]) for label, scorer, hits in json.loads(row[0])]

    def put(self, key: str, arms: list[CachedArm]) -> None:
        with self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO arms VALUES (?, ?)", (key, json.dumps(arms, ensure_ascii=False)))
