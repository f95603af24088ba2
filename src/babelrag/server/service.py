"""What the HTTP service holds: open knowledge bases (one process owns each embedded shard), a write
lock per KB, and a bounded gate for LLM work that says "busy" instead of queueing forever."""
from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from babelrag.kb import KnowledgeBase, resolve_store
from babelrag.store.schema import check_kb_name


class Busy(Exception):
    """Every LLM slot is taken and the waiting line is full."""


class Gate:
    """At most ``slots`` LLM jobs run; at most ``queue`` more wait; the next one is refused."""

    def __init__(self, slots: int, queue: int):
        self._running = threading.BoundedSemaphore(slots)
        self._admitted = threading.BoundedSemaphore(slots + queue)

    @contextmanager
    def enter(self) -> Iterator[None]:
        if not self._admitted.acquire(blocking=False):
            raise Busy
        try:
            with self._running:
                yield
        finally:
            self._admitted.release()


class Service:
    def __init__(self, store: str | None, runs: Path, api_keys: frozenset[str], llm: str | None = None,
                 llm_slots: int = 1, llm_queue: int = 8, timeout: float = 120.0, max_body: int = 10 << 20,
                 defaults: dict | None = None):
        """``defaults``: operator settings applied under every request's (``serve --set generate_k=3``)."""
        self.store = resolve_store(store)
        self.runs, self.api_keys, self.llm, self.timeout, self.max_body = runs, api_keys, llm, timeout, max_body
        self.defaults = defaults or {}
        self.gate = Gate(llm_slots, llm_queue)
        self._kbs: dict[str, KnowledgeBase] = {}
        self._open_lock = threading.Lock()
        self.write_locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)

    def kb(self, name: str) -> KnowledgeBase:
        check_kb_name(name)
        with self._open_lock:
            if name not in self._kbs:
                self._kbs[name] = KnowledgeBase.open(name, self.store)
            return self._kbs[name]

    def is_open(self, name: str) -> bool:
        return name in self._kbs

    def forget(self, name: str) -> None:
        with self._open_lock:
            kb = self._kbs.pop(name, None)
        if kb is not None:
            kb.close()

    def close(self) -> None:
        for name in list(self._kbs):
            self.forget(name)
