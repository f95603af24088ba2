"""The one place that knows the collection and query shapes, in engine-neutral terms.

Both adapters (embedded Qdrant Edge, Qdrant server via qdrant-client) translate exactly these
values into their own classes, so a KB built on one behaves the same on the other.
"""
from __future__ import annotations

import re
import uuid
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import islice
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

import numpy as np

from babelrag.errors import ConfigError
from babelrag.types import GLOBAL, Passage, PassageFilter

DENSE = "dense"
SPARSE = "bm25"
ORIGINAL_LANG = "original_lang"  # pivot-copy metadata (store/copies.py): the original passage's language
# indexed for filters; a pivot copy's original language is how a copy path's language restriction is applied
KEYWORD_FIELDS = ("lang", "country", "scope", "doc_id", "record_id", f"metadata.{ORIGINAL_LANG}")
INTEGER_FIELDS = ("chunk",)
_ID_NAMESPACE = uuid.UUID("6f1b6a2e-8c3d-4e0a-9b1e-babe1a9000aa")
_KB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
# A KB's name starts with a letter or digit, so names starting with "_" are babelrag's own: the staging
# areas of a rebuild (built aside, then swapped in) and the retired KB a swap sets aside. No user can
# name a KB so, so a rebuild of "kb1" never touches a KB called "kb1.old" or "kb1.rebuild" (it did).
# A KB's pivot-language copies (ingest/pivot_copies.py) live beside it under ``_pivot.<kb>`` the same way.
STAGING_PURPOSES = ("rebuild", "retired", "pivot")
_STAGING_NAME = re.compile(rf"^_(?:{'|'.join(STAGING_PURPOSES)})\.[A-Za-z0-9][A-Za-z0-9_.-]{{0,62}}$")


def check_kb_name(kb: str) -> str:
    """A name a user may give a KB (refused without repeating it: it may be anything a client sent)."""
    if not isinstance(kb, str) or not _KB_NAME.fullmatch(kb):  # fullmatch: "kb\n" is not "kb"
        raise ConfigError("kb: not a valid name (a letter or digit, then letters, digits, '_', '-', '.'; "
                          "up to 63)")
    return kb


def staging_name(kb: str, purpose: str) -> str:
    """The internal name where ``kb`` is staged for ``purpose`` (one of ``STAGING_PURPOSES``)."""
    return f"_{purpose}.{check_kb_name(kb)}"


def is_staging_name(name: str) -> bool:
    return isinstance(name, str) and bool(_STAGING_NAME.fullmatch(name))


def check_store_name(name: str) -> str:
    """A name a store may hold: a KB's, or one of babelrag's staging names."""
    return name if is_staging_name(name) else check_kb_name(name)


@dataclass(frozen=True, slots=True)
class CollectionSpec:
    """Vectors and indexes of one KB. Small KBs are scanned exactly; HNSW takes over past the threshold."""

    dim: int
    hnsw_m: int = 16
    hnsw_ef_construct: int = 100
    full_scan_threshold_kb: int = 10_000
    hnsw_ef: int = 128


def spec_of(manifest: Mapping[str, Any]) -> CollectionSpec:
    """The collection settings a manifest records (to build the same collection elsewhere)."""
    collection = manifest.get("collection") or {}
    return CollectionSpec(dim=int(manifest["embedder"]["dim"]),
                          **{k: int(collection[k]) for k in ("hnsw_m", "hnsw_ef_construct", "full_scan_threshold_kb",
                                                              "hnsw_ef") if k in collection})


@dataclass(frozen=True, slots=True)
class SparseTerms:
    indices: tuple[int, ...]
    values: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class StoredPoint:
    passage: Passage
    dense: np.ndarray
    sparse: SparseTerms

    @property
    def point_id(self) -> str:
        return point_id(self.passage.id)


@dataclass(frozen=True, slots=True)
class Match:
    """``key`` equals one of ``values`` (one value → exact match, several → any-of)."""

    key: str
    values: tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Where:
    """All of ``must``; at least one of ``should`` when given; none of ``must_not_ids``."""

    must: tuple[Match, ...] = ()
    should: tuple[Match, ...] = ()
    must_not_ids: tuple[str, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class ArmQuery:
    arm: Literal["dense", "bm25"]
    dense: np.ndarray | None = None
    sparse: SparseTerms | None = None
    with_terms: bool = False  # return each hit's keyword term ids (the indices of its stored keyword vector)
    limit: int | None = None  # this arm's own limit (default: the query's)


@dataclass(frozen=True, slots=True)
class Scored:
    passage: Passage
    score: float
    terms: array | None = None  # the term ids of its keyword vector (typecode "I", each once)


@dataclass(frozen=True, slots=True)
class ArmHits(Sequence[Scored]):
    """One arm's hits, read as a sequence, and how many the engine returned. They differ when a passage is
    deleted between the engine's answer and the read of its payload: it drops out, yet the arm was still cut
    at its limit, so fusion must not take it for an arm that returned everything it scores. (A passage an
    earlier search decoded is served from memory, so one deleted just after the engine answered stays in:
    it existed when the arm was scored.)"""

    hits: tuple[Scored, ...]
    returned: int

    def __getitem__(self, index):  # type: ignore[override]
        return self.hits[index]

    def __len__(self) -> int:
        return len(self.hits)

    def __iter__(self) -> Iterator[Scored]:  # Sequence's default iterates by index: 30x slower, per search
        return iter(self.hits)

    def complete(self, limit: int) -> bool:
        """The engine returned fewer than ``limit``: every passage this arm scores above zero is here."""
        return self.returned < limit


VECTORS = [DENSE, SPARSE]  # a point in full (copying, restoring)
TERMS = [SPARSE]  # what ``with_terms`` asks either engine for: the keyword vector only


def term_indices(record: Any) -> Sequence[int] | None:
    """The term ids of a returned point's keyword vector, as the engine gives them, when it was asked for."""
    sparse = (record.vector or {}).get(SPARSE)  # one access: the engine converts on each
    return sparse.indices if sparse is not None else None


def terms_of(record: Any) -> array | None:
    """The term ids of a returned point's keyword vector, when it was asked for: 4 bytes each, matched against a
    query's in one pass (``relevance/features.py``), never made a set per hit."""
    indices = term_indices(record)
    return array("I", indices) if indices is not None else None


def scored_of(record: Any, score: float, with_terms: bool) -> Scored:
    """A point returned by either engine (``.payload``, ``.vector``) as a Scored passage."""
    return Scored(passage_of(record.payload), float(score), terms_of(record) if with_terms else None)


def stored_of(record: Any) -> StoredPoint:
    """A point with everything needed to write it again (rollback, copying a KB between stores)."""
    dense, sparse = record.vector[DENSE], record.vector[SPARSE]
    return StoredPoint(passage_of(record.payload), np.asarray(dense, dtype=np.float32),
                       SparseTerms(tuple(int(i) for i in sparse.indices), tuple(float(v) for v in sparse.values)))


def scroll_points(next_page: Callable[[Any, int], tuple[list[Any], Any]],
                  page_size: int = 256) -> Iterator[StoredPoint]:
    """Every matching point in full, through an engine's ``(offset, size) -> (records, next)``, a page
    at a time (a copy of a large KB never holds it all in memory)."""
    offset = None
    while True:
        records, offset = next_page(offset, page_size)
        yield from (stored_of(r) for r in records)
        if offset is None:
            return


def pages(points: Iterable[StoredPoint], size: int) -> Iterator[list[StoredPoint]]:
    """Points in lists of ``size`` (upserts go in batches)."""
    iterator = iter(points)
    while page := list(islice(iterator, size)):
        yield page


def scroll_pages(next_page: Callable[[Any, int], tuple[list[Any], Any]], limit: int | None,
                 page_size: int = 256) -> list[Passage]:
    """Every passage (or the first ``limit``) through an engine's ``(offset, size) -> (records, next)``."""
    passages: list[Passage] = []
    offset = None
    while limit is None or len(passages) < limit:
        records, offset = next_page(offset, page_size if limit is None else min(page_size, limit - len(passages)))
        passages.extend(passage_of(r.payload) for r in records)
        if offset is None:
            break
    return passages


@lru_cache(maxsize=1 << 16)  # searches map every candidate back (``cosines``): a hash each is measurable
def point_id(passage_id: str) -> str:
    """Stable UUID per passage id, so re-indexing the same id replaces the point."""
    return str(uuid.uuid5(_ID_NAMESPACE, passage_id))


def where_for(flt: PassageFilter) -> Where | None:
    """The question's country means that country *plus* passages that apply everywhere (docs/methods.md#country-filter)."""
    if flt.is_empty():
        return None
    must = []
    if flt.langs:
        must.append(Match("lang", tuple(flt.langs)))
    if flt.scope:
        must.append(Match("scope", (flt.scope,)))
    if flt.doc_ids:
        must.append(Match("doc_id", tuple(flt.doc_ids)))
    should = (Match("country", (flt.country,)), Match("scope", (GLOBAL,))) if flt.country else ()
    return Where(must=tuple(must), should=should)


def payload_of(passage: Passage) -> dict[str, Any]:
    return {"text": passage.text, "doc_id": passage.doc_id, "lang": passage.lang, "title": passage.title,
            "country": passage.country, "scope": passage.scope, "source": passage.source,
            "record_id": passage.record_id, "chunk": passage.chunk, "passage_id": passage.id,
            "lang_confidence": passage.lang_confidence, "metadata": dict(passage.metadata)}


def passage_of(payload: Mapping[str, Any]) -> Passage:
    return Passage(id=payload["passage_id"], text=payload["text"], doc_id=payload["doc_id"],
                   lang=payload["lang"], title=payload.get("title") or "", country=payload.get("country"),
                   scope=payload.get("scope") or "local", source=payload.get("source") or "",
                   record_id=payload.get("record_id") or "", chunk=int(payload.get("chunk") or 0),
                   lang_confidence=payload.get("lang_confidence"), metadata=payload.get("metadata") or {})
