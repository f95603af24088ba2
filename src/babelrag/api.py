"""The public Python API: what babelrag promises to keep stable (the modules under it may change).

    import babelrag

    babelrag.index("faq", [{"id": "a", "text": "Apoteket säljer receptfria läkemedel.", "country": "SE"}])
    with babelrag.open_kb("faq") as kb:
        result = kb.search("Where do I buy medicine?", country="SE")   # a SearchResult
        answer = kb.ask("Where do I buy medicine?", preset="chat")     # an Answer, with citations
        for piece in kb.ask_stream("Var köper jag medicin?"):            # str pieces, then the Answer
            ...

Results are the library's typed values (``SearchResult``, ``Answer``, ``Hit``, ``Passage``), each with
its trace and ``to_dict()``. A configuration is a preset name (``babelrag.PRESETS``) plus settings
(any ``SearchConfig`` field, e.g. ``{"k": 5, "rerank": "learned"}``).
"""
from __future__ import annotations

import queue
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from babelrag import deadline
from babelrag.config import SearchConfig, for_country, preset_config
from babelrag.generate.answerer import Answerer
from babelrag.ingest.pipeline import IngestOptions, IngestReport, index_records, index_sources
from babelrag.ingest.readers import RawRecord
from babelrag.ingest.records import Defaults, validate_all
from babelrag.kb import KnowledgeBase
from babelrag.retrieve.pipeline import Searcher
from babelrag.store.base import Store
from babelrag.types import Answer, Question, SearchResult

Records = Iterable[Mapping[str, Any]]
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
        return dict(self._kb.manifest["languages"].get("all", {}))

    @property
    def countries(self) -> list[str]:
        return sorted(self._kb.manifest["languages"].get("countries", {}))

    @property
    def manifest(self) -> dict[str, Any]:
        """What built the index (versions, models, chunking, language sets) and any tuned profile."""
        return dict(self._kb.manifest)

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

    def search(self, question: str, *, preset: str = "default", country: str | None = None, lang: str | None = None,
               k: int | None = None, settings: Mapping[str, Any] | None = None, llm: str | None = None) -> SearchResult:
        """The evidence for ``question`` (its language detected unless ``lang``), with its trace; any
        failed model call is on ``result.trace.failures`` (and ``warnings()``), never an exception.
        ``country``: only that country's passages and global ones (unless ``settings`` say
        ``country_filter: False``: then it only picks the country's KB-language set)."""
        return self._searcher(_config(preset, settings, country, k=k, llm=llm)).search(Question(question, lang, country))

    def ask(self, question: str, *, preset: str = "multirag", country: str | None = None, lang: str | None = None,
            settings: Mapping[str, Any] | None = None, llm: str | None = None) -> Answer:
        """An answer in the question's language, citing the passages it used (``answer.citations``)."""
        return self._answerer(_config(preset, settings, country, llm=llm)).ask(Question(question, lang, country))

    def ask_stream(self, question: str, *, preset: str = "multirag", country: str | None = None,
                   lang: str | None = None, settings: Mapping[str, Any] | None = None,
                   llm: str | None = None) -> Iterator[str | Answer]:
        """Like ``ask``, yielding the answer's text as it is generated (``str`` pieces), then the ``Answer``."""
        answerer = self._answerer(_config(preset, settings, country, llm=llm))
        events: queue.Queue[object] = queue.Queue()
        # called off when the caller stops iterating (generation stops too); the caller's own deadline holds
        budget = deadline.Budget(within=deadline.current())

        def work() -> None:
            try:
                with deadline.limit(budget):
                    events.put(answerer.ask(Question(question, lang, country), on_text=events.put))
            except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
                events.put(error)

        threading.Thread(target=work, daemon=True).start()
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

    def index(self, data: Records | Sequence[str | Path] | str | Path, *, lang: str | None = None,
              country: str | None = None, scope: str | None = None) -> IngestReport:
        """Add or replace records (dicts with ``id`` and ``text``, optional ``lang``, ``country``, ``title``,
        ``doc_id``, ``metadata``…) or files and folders; all or nothing."""
        defaults = Defaults(lang=lang, country=country, scope=scope)  # type: ignore[arg-type]
        records = validate_all(_raw(data), defaults)
        return index_records(self.name, records, options=IngestOptions(defaults=defaults), kb=self._kb)

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
