"""A small persistent key → JSON store (SQLite, WAL, thread-safe) behind the caches of retrieval
candidates, LLM completions and translations, which differ only in what they key and keep."""
from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any


def digest(value: Any) -> str:
    """A stable key for any JSON-serialisable value (dict order does not matter)."""
    return hashlib.sha256(json.dumps(value, ensure_ascii=False, sort_keys=True).encode()).hexdigest()


class JsonStore:
    def __init__(self, path: Path, table: str):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._table = table
        self._db = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"CREATE TABLE IF NOT EXISTS {table} (key TEXT PRIMARY KEY, value TEXT)")
        self._lock = threading.Lock()

    def get(self, key: str) -> Any | None:
        with self._lock:
            row = self._db.execute(f"SELECT value FROM {self._table} WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, value: Any) -> None:
        with self._lock, self._db:
            self._db.execute(f"INSERT OR REPLACE INTO {self._table} VALUES (?, ?)",
                             (key, json.dumps(value, ensure_ascii=False)))
