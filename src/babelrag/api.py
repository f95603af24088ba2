"""The public Python API: what babelrag promises to keep stable (the modules under it may change).

    import babelrag

    babelrag.index("faq", [{"id": "a", "text": "Apoteket säljer receptfria läkemedel.", "country": "SE"}])
    with babelrag.open_kb("faq") as kb:
        result = kb.search("Where do I buy medicine?", country="SE")   # a SearchResult
        answer = kb.ask("Where do I buy medicine?", preset="chat")     # an Answer, with citations
        for piece in kb.ask_stream("Var köper jag medicin?"):            # str pieces, then the Answer
            ...
        follow_up = kb.ask("Och i Polen?", history=[("user", "Var köper jag medicin i Sverige?")])
        result = await kb.asearch("…"); answer = await kb.aask("…")      # asyncio: off the event loop
        async for piece in kb.aask_stream("…"): ...

Results are the library's typed values (``SearchResult``, ``Answer``, ``Hit``, ``Passage``), each with
its trace and ``to_dict()``. A configuration is a preset name (``babelrag.PRESETS``) plus settings
(any ``SearchConfig`` field, e.g. ``{"k": 5, "rerank": "learned"}``).
"""
from __future__ import annotations

import asyncio
import queue
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from babelrag import deadline
from babelrag.config import SearchConfig, for_country, preset_config
from babelrag.door import Checked, checked
from babelrag.generate.answerer import Answerer
from babelrag.generate.conversation import turns_of
from babelrag.ingest.pipeline import IngestOptions, IngestReport, index_records, index_sources
from babelrag.ingest.readers import RawRecord
from babelrag.ingest.records import Defaults, validate_all
from babelrag.kb import KnowledgeBase
from babelrag.retrieve.pipeline import Searcher
from babelrag.store.base import Store
from babelrag.types import Answer, Question, SearchResult

Records = Iterable[Mapping[str, Any]]
History = Sequence[Mapping[str, Any] | Sequence[str]]  # chat messages ({"role", "content"}) or (role, text)
KEPT_CONFIGS = 16


def _config(preset: str, settings: Mapping[str, Any] | None, country: str | None, **explicit: Any) -> SearchConfig:
    """Arguments given by name (``k``, ``llm``) win over the same field in ``settings``."""
    given = {**dict(settings or {}), **{k: v for k, v in explicit.items() if v is not None}}
    return preset_config(preset, for_country(given, country))


class KB:
    """An open knowledge base. Searchers and answerers are kept per configuration, so repeated calls with
    the same preset and settings reuse them; close it (or use ``with``) to release the store."""

    def __init__(self, name: str, store: Store | str | None = None):
        self._kb = KnowledgeBase.open(name, store)
        self._searchers: OrderedDict[str, Searcher] = OrderedDict()
        self._answerers: OrderedDict[str, Answerer] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._kb.name

    @property
    def languages(self) -> dict[str, int]:
        """Passages per language."""
        return dict(self._kb.manifest.languages.all)

    @property
    def countries(self) -> list[str]:
        return sorted(self._kb.manifest.languages.countries)

    @property
    def manifest(self) -> dict[str, Any]:
        """What built the index (versions, models, chunking, language sets) and any tuned profile."""
        return self._kb.manifest.stored()

    def _searcher(self, config: SearchConfig) -> Searcher:
        return self._kept(self._searchers, config, Searcher)

    def _answerer(self, config: SearchConfig) -> Answerer:
        return self._kept(self._answerers, config, Answerer)

    def _kept(self, kept: OrderedDict[str, Any], config: SearchConfig, build: Any) -> Any:
        """The last ``KEPT_CONFIGS`` configurations' searchers or answerers (a caller varying ``k`` per
        call does not grow memory without bound)."""
        key = config.model_dump_json()
        with self._lock:
            if key not in kept:
                kept[key] = build(self._kb, config)
                while len(kept) > KEPT_CONFIGS:
                    kept.popitem(last=False)
            kept.move_to_end(key)
            return kept[key]

    def _checked(self, question: str, lang: str | None, country: str | None, config: SearchConfig) -> Checked:
        """Codes checked against the KB (``door.py``): a bad one is a ``ConfigError`` naming the field."""
        return checked(Question(question, lang, country), config, self._kb.manifest.languages)

    def search(self, question: str, *, preset: str = "default", country: str | None = None, lang: str | None = None,
               k: int | None = None, settings: Mapping[str, Any] | None = None, llm: str | None = None) -> SearchResult:
        """The evidence for ``question`` (its language detected unless ``lang``), with its trace; any
        failed model call is on ``result.trace.failures`` (and ``warnings()``), never an exception.
        ``country``: only that country's passages and global ones (unless ``settings`` say
        ``country_filter: False``: then it only picks the country's KB-language set); one the KB does not
        hold is a warning. ``lang`` and ``settings["langs"]`` are ISO 639 codes."""
        door = self._checked(question, lang, country, _config(preset, settings, country, k=k, llm=llm))
        result = self._searcher(door.config).search(door.question)
        door.noted(result.trace)
        return result

    def ask(self, question: str, *, preset: str = "multirag", country: str | None = None, lang: str | None = None,
            settings: Mapping[str, Any] | None = None, llm: str | None = None, history: History = ()) -> Answer:
        """An answer in the question's language, citing the passages it used (``answer.citations``).
        ``history``: the conversation's earlier turns (chat messages or ``(role, text)`` pairs); the question
        is then rewritten to stand alone before retrieval (the trace's ``conversation`` step)."""
        door = self._checked(question, lang, country, _config(preset, settings, country, llm=llm))
        answer = self._answerer(door.config).ask(door.question, history=turns_of(history))
        door.noted(answer.trace)
        return answer

    def ask_stream(self, question: str, *, preset: str = "multirag", country: str | None = None,
                   lang: str | None = None, settings: Mapping[str, Any] | None = None,
                   llm: str | None = None, history: History = ()) -> Iterator[str | Answer]:
        """Like ``ask``, yielding the answer's text as it is generated (``str`` pieces), then the ``Answer``."""
        events: queue.Queue[object] = queue.Queue()
        budget = self._answering(question, preset, country, lang, settings, llm, history, events.put)
        try:
            while True:
                event = events.get()
                if isinstance(event, BaseException):
                    raise event
                yield event  # type: ignore[misc]
                if isinstance(event, Answer):
                    return
        finally:
            budget.cancel()

    def _answering(self, question: str, preset: str, country: str | None, lang: str | None,
                   settings: Mapping[str, Any] | None, llm: str | None, history: History,
                   put: Callable[[object], None]) -> deadline.Budget:
        """Start answering on a worker thread that ``put``s each text piece, then the ``Answer`` (or the
        error). The returned budget calls it off when the caller stops listening (generation stops too);
        the caller's own deadline holds."""
        door = self._checked(question, lang, country, _config(preset, settings, country, llm=llm))
        answerer, turns = self._answerer(door.config), turns_of(history)
        budget = deadline.Budget(within=deadline.current())

        def work() -> None:
            try:
                with deadline.limit(budget):
                    answer = answerer.ask(door.question, on_text=put, history=turns)
                door.noted(answer.trace)
                put(answer)
            except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
                put(error)

        threading.Thread(target=work, daemon=True).start()
        return budget

    async def asearch(self, question: str, **options: Any) -> SearchResult:
        """``search`` off the event loop (a worker thread), for asyncio applications."""
        return await asyncio.to_thread(self.search, question, **options)

    async def aask(self, question: str, **options: Any) -> Answer:
        """``ask`` off the event loop; cancelling the awaiting task stops the work at its next check."""
        budget = deadline.Budget(within=deadline.current())

        def work() -> Answer:
            with deadline.limit(budget):
                return self.ask(question, **options)
        try:
            return await asyncio.to_thread(work)
        finally:
            budget.cancel()

    async def aask_stream(self, question: str, *, preset: str = "multirag", country: str | None = None,
                          lang: str | None = None, settings: Mapping[str, Any] | None = None,
                          llm: str | None = None, history: History = ()) -> AsyncIterator[str | Answer]:
        """``ask_stream`` for asyncio: text pieces as they are generated, then the ``Answer``; the event loop
        never waits on the model, and leaving the loop early stops generation."""
        loop, events = asyncio.get_running_loop(), asyncio.Queue()
        budget = self._answering(question, preset, country, lang, settings, llm, history,
                                 lambda event: loop.call_soon_threadsafe(events.put_nowait, event))
        try:
            while True:
                event = await events.get()
                if isinstance(event, BaseException):
                    raise event
                yield event
                if isinstance(event, Answer):
                    return
        finally:
            budget.cancel()

    def index(self, data: Records | Sequence[str | Path] | str | Path, *, lang: str | None = None,
              country: str | None = None, scope: str | None = None) -> IngestReport:
        """Add or replace records (dicts with ``id`` and ``text``, optional ``lang``, ``country``, ``title``,
        ``doc_id``, ``metadata``…) or files and folders; all or nothing."""
        defaults = Defaults(lang=lang, country=country, scope=scope)  # type: ignore[arg-type]
        records = validate_all(_raw(data), defaults)
        return index_records(self.name, records, options=IngestOptions(defaults=defaults), kb=self._kb)

    def delete(self, ids: Sequence[str] = (), *, doc_ids: Sequence[str] = ()) -> int:
        """Remove records (all their chunks) by id and every passage of the given pages; returns how many
        passages went."""
        return self._kb.delete(ids=ids, doc_ids=doc_ids)

    def close(self) -> None:
        self._kb.close()

    def __enter__(self) -> KB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _raw(data: Records | Sequence[str | Path] | str | Path) -> Iterator[RawRecord]:
    from babelrag.ingest.readers import read_source

    for number, item in enumerate(_items(data), start=1):
        if isinstance(item, (str, Path)):
            yield from read_source(item)
        else:
            yield RawRecord(dict(item), "records", number)


def _items(data: Records | Sequence[str | Path] | str | Path) -> list[Any]:
    """One path is a source, not a sequence of characters; a single record is one record."""
    return [data] if isinstance(data, (str, Path, Mapping)) else list(data)


def open_kb(name: str, store: Store | str | None = None) -> KB:
    """An existing knowledge base (``store``: a directory, an ``http(s)://`` Qdrant URL, or the default)."""
    return KB(name, store)


def index(name: str, data: Records | Sequence[str | Path] | str | Path, store: Store | str | None = None, *,
          lang: str | None = None, country: str | None = None, scope: str | None = None,
          rebuild: bool = False) -> IngestReport:
    """Create the knowledge base if needed and index records or files into it; all or nothing."""
    defaults = Defaults(lang=lang, country=country, scope=scope)  # type: ignore[arg-type]
    options = IngestOptions(defaults=defaults, rebuild=rebuild)
    items = _items(data)
    if items and all(isinstance(item, (str, Path)) for item in items):
        return index_sources(name, [str(item) for item in items], store, options)
    return index_records(name, validate_all(_raw(items), defaults), store, options)
