"""A persistent embedding cache in front of any embedder, keyed by (fingerprint, kind, text).

Embedding is the slow part of indexing on CPU; benchmarks and sweeps re-embed the same texts
across KBs and runs. Keys include the embedder's fingerprint, so another model never hits.
"""
from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from babelrag.json_store import LRU, open_cache
from babelrag.models.embed import Embedder, Kind


class CachedEmbedder:
    def __init__(self, inner: Embedder, path: Path):
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self._db = open_cache(path, "vectors", "BLOB PRIMARY KEY, vector BLOB")
        self._lock = threading.Lock()
        self._lru = LRU(self._db, "vectors", self._lock)
        self._prefix = inner.fingerprint().encode()
        self.hits = self.misses = 0

    def _key(self, kind: Kind, text: str) -> bytes:
        return hashlib.sha256(self._prefix + b"\0" + kind.encode() + b"\0" + text.encode()).digest()

    def embed(self, texts: Sequence[str], kind: Kind) -> np.ndarray:
        keys = [self._key(kind, t) for t in texts]
        found: dict[bytes, np.ndarray] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = keys[start:start + 500]
                marks = ",".join("?" * len(chunk))
                for key, blob in self._db.execute(f"SELECT key, vector FROM vectors WHERE key IN ({marks})", chunk):
                    found[key] = np.frombuffer(blob, dtype=np.float32)
        missing = [i for i, key in enumerate(keys) if key not in found]
        if found:
            self._lru.touch(list(found))
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        if missing:
            fresh = self.inner.embed([texts[i] for i in missing], kind)
            now = time.time_ns()
            with self._lock, self._db:
                self._db.executemany("INSERT OR REPLACE INTO vectors (key, vector, used) VALUES (?, ?, ?)",
                                     [(keys[i], fresh[j].astype(np.float32).tobytes(), now)
                                      for j, i in enumerate(missing)])
            self._lru.after_put(len(missing))
            for j, i in enumerate(missing):
                found[keys[i]] = fresh[j]
        if not keys:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.vstack([found[key] for key in keys]).astype(np.float32)

    def token_count(self, text: str) -> int | None:
        counter = getattr(self.inner, "token_count", None)
        return counter(text) if counter else None

    def spec(self) -> dict[str, Any]:
        return self.inner.spec()

    def fingerprint(self) -> str:
        return self.inner.fingerprint()
