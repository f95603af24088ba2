"""A small persistent key → JSON store (SQLite, WAL, thread-safe) behind the caches of retrieval
candidates, LLM completions and translations, which differ only in what they key and keep.

Caches must never take the service down: a file that is not a database any more is moved aside and
started afresh (with a warning), and each table keeps at most ``BABELRAG_CACHE_MAX_ROWS`` rows (default
500,000), dropping the least recently used tenth when it grows past that — so traffic cannot fill the disk.
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
import warnings
from pathlib import Path
from typing import Any

EVICT_EVERY = 1000  # puts between size checks


def digest(value: Any) -> str:
    """A stable key for any JSON-serialisable value (dict order does not matter)."""
    return hashlib.sha256(json.dumps(value, ensure_ascii=False, sort_keys=True).encode()).hexdigest()


def max_rows() -> int:
    value = os.environ.get("BABELRAG_CACHE_MAX_ROWS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else 500_000


def open_cache(path: Path, table: str, columns: str) -> sqlite3.Connection:
    """A cache database with ``table`` (``key`` primary key, ``columns``, ``used`` for LRU); a corrupt
    file is moved aside (``.corrupt-<time>``) and replaced by an empty one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for attempt in (1, 2):
        try:
            db = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"CREATE TABLE IF NOT EXISTS {table} (key {columns}, used INTEGER DEFAULT 0)")
            if "used" not in {row[1] for row in db.execute(f"PRAGMA table_info({table})")}:  # a cache from before
                db.execute(f"ALTER TABLE {table} ADD COLUMN used INTEGER DEFAULT 0")
            db.execute(f"CREATE INDEX IF NOT EXISTS {table}_used ON {table} (used)")
            return db
        except sqlite3.DatabaseError as error:
            if attempt == 2:
                raise
            aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
            for suffix in ("", "-wal", "-shm"):
                if Path(f"{path}{suffix}").exists():
                    os.replace(f"{path}{suffix}", f"{aside}{suffix}")
            warnings.warn(f"cache {path} was unreadable ({error}); moved aside to {aside}, starting afresh",
                          stacklevel=2)
    raise AssertionError("unreachable")


class LRU:
    """The ``used`` bookkeeping and eviction for one cache table."""

    def __init__(self, db: sqlite3.Connection, table: str, lock: threading.Lock):
        self.db, self.table, self.lock = db, table, lock
        self._puts = 0

    def touch(self, keys: list[Any]) -> None:
        now = time.time_ns()
        with self.lock, self.db:
            self.db.executemany(f"UPDATE {self.table} SET used = ? WHERE key = ?", [(now, k) for k in keys])

    def after_put(self, count: int = 1) -> None:
        self._puts += count
        if self._puts < EVICT_EVERY:
            return
        self._puts = 0
        limit = max_rows()
        with self.lock, self.db:
            rows = self.db.execute(f"SELECT COUNT(*) FROM {self.table}").fetchone()[0]
            if rows > limit:
                self.db.execute(f"DELETE FROM {self.table} WHERE key IN (SELECT key FROM {self.table} "
                                f"ORDER BY used LIMIT ?)", (rows - limit + limit // 10,))


class JsonStore:
    def __init__(self, path: Path, table: str):
        self._table = table
        self._db = open_cache(path, table, "TEXT PRIMARY KEY, value TEXT")
        self._lock = threading.Lock()
        self._lru = LRU(self._db, table, self._lock)

    def get(self, key: str) -> Any | None:
        with self._lock:
            row = self._db.execute(f"SELECT value FROM {self._table} WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        self._lru.touch([key])
        return json.loads(row[0])

    def put(self, key: str, value: Any) -> None:
        with self._lock, self._db:
            self._db.execute(f"INSERT OR REPLACE INTO {self._table} (key, value, used) VALUES (?, ?, ?)",
                             (key, json.dumps(value, ensure_ascii=False), time.time_ns()))
        self._lru.after_put()
