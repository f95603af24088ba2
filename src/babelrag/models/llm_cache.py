"""A persistent cache of LLM completions, keyed by everything that determines them.

Decoding is greedy and seeded (temperature 0 by default), so the same request gives the same
answer: evaluation sweeps, ablations and resumed runs reuse calls instead of paying for them
again. A cached completion keeps the original tokens and seconds and says it was cached, so
cost accounting still reports what a method costs. Sampled requests (temperature > 0) bypass it.
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from babelrag.models.llm_types import LLM, Completion, Message


class CachedLLM:
    def __init__(self, inner: LLM, path: Path):
        self.inner, self.name = inner, inner.name
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS completions (key TEXT PRIMARY KEY, value TEXT)")
        self._lock = threading.Lock()

    def _key(self, messages: list[Message], json_schema: dict[str, Any] | None, max_tokens: int, seed: int) -> str:
        return hashlib.sha256(json.dumps([self.name, messages, json_schema, max_tokens, seed], ensure_ascii=False,
                                         sort_keys=True).encode()).hexdigest()

    def _get(self, key: str) -> Completion | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM completions WHERE key = ?", (key,)).fetchone()
        return replace(Completion(**json.loads(row[0])), cached=True) if row else None

    def _put(self, key: str, completion: Completion) -> None:
        with self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO completions VALUES (?, ?)",
                             (key, json.dumps(asdict(completion), ensure_ascii=False)))

    def complete(self, messages: list[Message], json_schema: dict[str, Any] | None = None, max_tokens: int = 256,
                 temperature: float = 0.0, seed: int = 0) -> Completion:
        if temperature > 0:
            return self.inner.complete(messages, json_schema, max_tokens, temperature, seed)
        key = self._key(messages, json_schema, max_tokens, seed)
        if (hit := self._get(key)) is not None:
            return hit
        completion = self.inner.complete(messages, json_schema, max_tokens, temperature, seed)
        self._put(key, completion)
        return completion

    def stream(self, messages: list[Message], on_text: Callable[[str], None], max_tokens: int = 256,
               temperature: float = 0.0, seed: int = 0) -> Completion:
        """A cached answer arrives as one piece; a fresh one streams and is then stored."""
        if temperature > 0:
            return self.inner.stream(messages, on_text, max_tokens, temperature, seed)
        key = self._key(messages, None, max_tokens, seed)
        if (hit := self._get(key)) is not None:
            on_text(hit.text)
            return hit
        completion = self.inner.stream(messages, on_text, max_tokens, temperature, seed)
        self._put(key, completion)
        return completion
