"""A Qdrant server or cluster through qdrant-client, with the same schema and queries as Edge.

The manifest lives in the collection's metadata, so the index and its provenance travel together.
``:memory:`` is qdrant-client's local mode: the same client code a cluster uses, for tests.
"""
from __future__ import annotations

import os
import threading
import warnings
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np
from qdrant_client import QdrantClient
from qdrant_client import models as qm

from babelrag import deadline
from babelrag.errors import KBNotFound, KBUnreadable, StoreError
from babelrag.store.schema import (
    DENSE,
    INTEGER_FIELDS,
    KEYWORD_FIELDS,
    SPARSE,
    TERMS,
    VECTORS,
    ArmHits,
    ArmQuery,
    CollectionSpec,
    Match,
    Scored,
    StoredPoint,
    Where,
    check_store_name,
    is_staging_name,
    pages,
    payload_of,
    point_id,
    scored_of,
    scroll_pages,
    scroll_points,
    spec_of,
)
from babelrag.types import Passage

MANIFEST_KEY = "babelrag_manifest"
JOURNAL_KEY = "babelrag_journal"
_writes: defaultdict[tuple[str, str], threading.RLock] = defaultdict(threading.RLock)  # per (server, collection)


def _match(condition: Match) -> qm.FieldCondition:
    values = list(condition.values)
    match = qm.MatchValue(value=values[0]) if len(values) == 1 else qm.MatchAny(any=values)
    return qm.FieldCondition(key=condition.key, match=match)


def _filter(where: Where | None) -> qm.Filter | None:
    if where is None:
        return None
    must_not = [qm.HasIdCondition(has_id=list(where.must_not_ids))] if where.must_not_ids else None
    return qm.Filter(must=[_match(m) for m in where.must] or None,
                     should=[_match(m) for m in where.should] or None, must_not=must_not)


def _query(arm: ArmQuery) -> Any:
    if arm.arm == DENSE:
        return [float(x) for x in arm.dense]
    return qm.SparseVector(indices=list(arm.sparse.indices), values=list(arm.sparse.values))


class RemoteCollection:
    """``recovers``: a server is shared by processes that cannot see each other, so an unfinished write
    found at open is taken for a dead one's (as before per-process sharing; run one writer per KB)."""

    recovers = True

    def __init__(self, name: str, client: QdrantClient, hnsw_ef: int, location: str = ""):
        self.name, self._client, self._hnsw_ef, self._location = name, client, hnsw_ef, location

    def writing(self) -> AbstractContextManager[Any]:
        """Held for a whole write: one write at a time per KB in this process."""
        return _writes[(self._location, self.name)]

    def read_manifest(self) -> dict[str, Any]:
        metadata = self._client.get_collection(self.name).config.metadata or {}
        return dict(metadata[MANIFEST_KEY])

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        self._client.update_collection(self.name, metadata={MANIFEST_KEY: manifest})

    def read_journal(self) -> dict[str, Any] | None:
        metadata = self._client.get_collection(self.name).config.metadata or {}
        return metadata.get(JOURNAL_KEY)

    def write_journal(self, journal: dict[str, Any] | None) -> None:
        self._client.update_collection(self.name, metadata={JOURNAL_KEY: journal})

    def upsert(self, points: Sequence[StoredPoint]) -> None:
        self._client.upsert(self.name, wait=True, points=[
            qm.PointStruct(id=p.point_id, payload=payload_of(p.passage), vector={
                DENSE: [float(x) for x in p.dense],
                SPARSE: qm.SparseVector(indices=list(p.sparse.indices), values=list(p.sparse.values))})
            for p in points])

    def delete(self, where: Where) -> int:
        before = self.count()
        self._client.delete(self.name, points_selector=qm.FilterSelector(filter=_filter(where)), wait=True)
        return before - self.count()

    def query(self, arms: Sequence[ArmQuery], where: Where | None, limit: int) -> list[ArmHits]:
        """One round trip, payloads included (a server's payload reads cost less than a second trip)."""
        deadline.check("searching the index")
        flt = _filter(where)
        requests = [qm.QueryRequest(query=_query(arm), using=arm.arm, limit=arm.limit or limit, filter=flt, with_payload=True,
                                    with_vector=TERMS if arm.with_terms else False,
                                    params=qm.SearchParams(hnsw_ef=self._hnsw_ef) if arm.arm == DENSE else None)
                    for arm in arms]
        responses = self._client.query_batch_points(self.name, requests)
        return [ArmHits(tuple(scored_of(p, p.score, arm.with_terms) for p in response.points), len(response.points))
                for arm, response in zip(arms, responses, strict=True)]

    def vectors(self, passage_ids: Sequence[str]) -> dict[str, np.ndarray]:
        by_point = {point_id(pid): pid for pid in passage_ids}
        if not by_point:
            return {}
        deadline.check("scoring the candidates")
        records = self._client.retrieve(self.name, list(by_point), with_payload=False, with_vectors=[DENSE])
        return {by_point[str(record.id)]: np.asarray(record.vector[DENSE], dtype=np.float32) for record in records}

    def forget_passages(self) -> None:
        """Nothing to forget: every search reads its hits' payloads from the server."""

    def fetch(self, passage_ids: Sequence[str], with_terms: bool = False) -> dict[str, Scored]:
        records = self._client.retrieve(self.name, [point_id(pid) for pid in passage_ids], with_payload=True,
                                        with_vectors=TERMS if with_terms else False)
        return {s.passage.id: s for s in (scored_of(r, 0.0, with_terms) for r in records)}

    def scroll(self, where: Where | None = None, limit: int | None = None) -> list[Passage]:
        flt = _filter(where)
        return scroll_pages(lambda offset, size: self._client.scroll(
            self.name, scroll_filter=flt, limit=size, offset=offset, with_payload=True), limit)

    def points(self, where: Where | None = None) -> Iterator[StoredPoint]:
        flt = _filter(where)
        return scroll_points(lambda offset, size: self._client.scroll(
            self.name, scroll_filter=flt, limit=size, offset=offset, with_payload=True, with_vectors=VECTORS))

    def facet(self, key: str, where: Where | None = None) -> dict[str, int]:
        response = self._client.facet(self.name, key=key, limit=10_000, exact=True, facet_filter=_filter(where))
        return {str(hit.value): int(hit.count) for hit in response.hits if hit.count > 0}

    def count(self, where: Where | None = None) -> int:
        return int(self._client.count(self.name, count_filter=_filter(where), exact=True).count)

    def optimize(self) -> None:
        """The server optimises in the background; nothing to drive from here."""

    def close(self) -> None:
        """The client is shared by the store and closed with it."""


class RemoteStore:
    def __init__(self, location: str):
        self.location = location
        try:
            if location == ":memory:":
                self._client = QdrantClient(":memory:")
            else:
                self._client = QdrantClient(url=location, api_key=os.environ.get("QDRANT_API_KEY"), timeout=60)
                self._client.get_collections()
        except Exception as error:  # connection refused, TLS, auth: all mean "can't reach the store"
            raise StoreError(f"cannot reach Qdrant at {location}: {error}") from error

    def list(self) -> list[str]:
        """The KBs (babelrag's own staging collections are not listed)."""
        return sorted(c.name for c in self._client.get_collections().collections if not is_staging_name(c.name))

    def exists(self, kb: str) -> bool:
        return self._client.collection_exists(check_store_name(kb))

    def manifest(self, kb: str) -> dict[str, Any]:
        return self.open(kb).read_manifest()  # opening a remote collection loads nothing

    def create(self, kb: str, spec: CollectionSpec, manifest: dict[str, Any],
               journal: dict[str, Any] | None = None) -> RemoteCollection:
        """``journal`` is in the collection's metadata from its creation on."""
        if self.exists(kb):
            raise StoreError(f"knowledge base '{kb}' already exists at {self.location}")
        self._client.create_collection(
            kb, vectors_config={DENSE: qm.VectorParams(size=spec.dim, distance=qm.Distance.DOT)},
            sparse_vectors_config={SPARSE: qm.SparseVectorParams(modifier=qm.Modifier.IDF)},
            hnsw_config=qm.HnswConfigDiff(m=spec.hnsw_m, ef_construct=spec.hnsw_ef_construct,
                                          full_scan_threshold=spec.full_scan_threshold_kb),
            metadata={MANIFEST_KEY: manifest, **({JOURNAL_KEY: journal} if journal is not None else {})})
        with warnings.catch_warnings():  # qdrant-client's local mode warns that it ignores them: a server needs them
            warnings.filterwarnings("ignore", "Payload indexes have no effect", UserWarning)
            for field in KEYWORD_FIELDS:
                self._client.create_payload_index(kb, field, qm.PayloadSchemaType.KEYWORD, wait=True)
            for field in INTEGER_FIELDS:
                self._client.create_payload_index(kb, field, qm.PayloadSchemaType.INTEGER, wait=True)
        return RemoteCollection(kb, self._client, spec.hnsw_ef, self.location)

    def open(self, kb: str) -> RemoteCollection:
        if not self.exists(kb):
            raise KBNotFound(kb, self.location, self.list())
        collection = RemoteCollection(kb, self._client, 128, self.location)
        try:
            manifest = collection.read_manifest()
            collection._hnsw_ef = int((manifest.get("collection") or {}).get("hnsw_ef", 128))
        except KeyError as error:
            raise KBUnreadable(kb, "manifest: not built by babelrag (no manifest in its metadata)") from error
        except (ValueError, TypeError, AttributeError) as error:
            raise KBUnreadable(kb, f"manifest: {error}") from error
        return collection

    def replace(self, kb: str, staged: str) -> None:
        """A server cannot rename a collection: the staged points are copied over the old KB once the
        staged one is complete (not atomic for readers of that moment, but never a lost KB)."""
        source = self.open(staged)
        manifest = source.read_manifest()
        self.drop(kb)
        target = self.create(kb, spec_of(manifest), {**manifest, "kb": kb})
        for page in pages(source.points(), 256):
            target.upsert(page)
        self.drop(staged)

    def drop(self, kb: str) -> None:
        if not self.exists(kb):
            raise KBNotFound(kb, self.location, self.list())
        self._client.delete_collection(kb)
