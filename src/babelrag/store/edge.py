"""Embedded Qdrant Edge: the Qdrant Rust engine in-process, one shard directory per KB.

A shard belongs to one process at a time, so a KB directory is locked while open and a second
opener gets a clear message instead of a corrupted shard.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from babelrag.errors import KBNotFound, StoreError
from babelrag.store.schema import (
    DENSE,
    INTEGER_FIELDS,
    KEYWORD_FIELDS,
    SPARSE,
    VECTORS,
    ArmQuery,
    CollectionSpec,
    Match,
    Scored,
    StoredPoint,
    Where,
    check_kb_name,
    payload_of,
    point_id,
    scored_of,
    scroll_pages,
    scroll_points,
)
from babelrag.types import Passage

MANIFEST = "manifest.json"
JOURNAL = "ingest.journal.json"


def _match(condition: Match) -> qe.FieldCondition:
    values = list(condition.values)
    match = qe.MatchValue(values[0]) if len(values) == 1 else qe.MatchAny(values)
    return qe.FieldCondition(condition.key, match=match)


def _filter(where: Where | None) -> qe.Filter | None:
    if where is None:
        return None
    must_not = [qe.HasIdCondition(set(where.must_not_ids))] if where.must_not_ids else None
    return qe.Filter(must=[_match(m) for m in where.must] or None,
                     should=[_match(m) for m in where.should] or None, must_not=must_not)


def _query(arm: ArmQuery) -> qe.Query:
    if arm.arm == DENSE:
        return qe.Query.Nearest([float(x) for x in arm.dense], using=DENSE)
    return qe.Query.Nearest(qe.SparseVector(list(arm.sparse.indices), list(arm.sparse.values)), using=SPARSE)


class EdgeCollection:
    def __init__(self, name: str, directory: Path, shard: qe.EdgeShard, lock_handle: Any, hnsw_ef: int):
        self.name, self._dir, self._shard, self._lock, self._hnsw_ef = name, directory, shard, lock_handle, hnsw_ef

    def read_manifest(self) -> dict[str, Any]:
        return json.loads((self._dir / MANIFEST).read_text(encoding="utf-8"))

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        tmp = self._dir / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps(manifest, indent=2, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, self._dir / MANIFEST)

    def read_journal(self) -> dict[str, Any] | None:
        path = self._dir / JOURNAL
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None

    def write_journal(self, journal: dict[str, Any] | None) -> None:
        path = self._dir / JOURNAL
        if journal is None:
            path.unlink(missing_ok=True)
            return
        tmp = path.with_name(JOURNAL + ".tmp")
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(journal, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)

    def upsert(self, points: Sequence[StoredPoint]) -> None:
        self._shard.update(qe.UpdateOperation.upsert_points([
            qe.Point(p.point_id, {DENSE: [float(x) for x in p.dense],
                                  SPARSE: qe.SparseVector(list(p.sparse.indices), list(p.sparse.values))},
                     payload_of(p.passage))
            for p in points]))
        self._shard.flush()

    def delete(self, where: Where) -> int:
        before = self.count()
        self._shard.update(qe.UpdateOperation.delete_points_by_filter(_filter(where)))
        self._shard.flush()
        return before - self.count()

    def query(self, arms: Sequence[ArmQuery], where: Where | None, limit: int,
              with_vectors: bool = False) -> list[list[Scored]]:
        flt = _filter(where)
        requests = [qe.QueryRequest(limit=limit, query=_query(arm), filter=flt, with_payload=True,
                                    with_vector=VECTORS if with_vectors or arm.with_vectors else False,
                                    params=qe.SearchParams(hnsw_ef=self._hnsw_ef) if arm.arm == DENSE else None)
                    for arm in arms]
        results = self._shard.query_batch(qe.QueryBatchRequest(requests))
        return [[scored_of(p, p.score, with_vectors or arm.with_vectors) for p in points]
                for arm, points in zip(arms, results)]

    def fetch(self, passage_ids: Sequence[str], with_vectors: bool = False) -> dict[str, Scored]:
        records = self._shard.retrieve([point_id(pid) for pid in passage_ids], with_payload=True,
                                       with_vector=VECTORS if with_vectors else False)
        return {s.passage.id: s for s in (scored_of(r, 0.0, with_vectors) for r in records)}

    def scroll(self, where: Where | None = None, limit: int | None = None) -> list[Passage]:
        flt = _filter(where)
        return scroll_pages(lambda offset, size: self._shard.scroll(
            qe.ScrollRequest(offset=offset, limit=size, filter=flt, with_payload=True)), limit)

    def points(self, where: Where | None = None) -> Iterator[StoredPoint]:
        flt = _filter(where)
        return scroll_points(lambda offset, size: self._shard.scroll(
            qe.ScrollRequest(offset=offset, limit=size, filter=flt, with_payload=True, with_vector=VECTORS)))

    def facet(self, key: str, where: Where | None = None) -> dict[str, int]:
        response = self._shard.facet(qe.FacetRequest(key=key, limit=10_000, exact=True, filter=_filter(where)))
        return {str(hit.value): int(hit.count) for hit in response.hits if hit.count > 0}

    def count(self, where: Where | None = None) -> int:
        return int(self._shard.count(qe.CountRequest(filter=_filter(where), exact=True)))

    def optimize(self) -> None:
        while self._shard.optimize():
            pass

    def close(self) -> None:
        if self._shard is not None:
            self._shard.flush()
            self._shard.close()
            self._shard = None
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()


class EdgeStore:
    def __init__(self, location: str):
        self.location = location
        self.root = Path(location).expanduser()

    def _dir(self, kb: str) -> Path:
        return self.root / check_kb_name(kb)

    def list(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if (p / MANIFEST).is_file())

    def exists(self, kb: str) -> bool:
        return (self._dir(kb) / MANIFEST).is_file()

    def _lock(self, directory: Path, kb: str) -> Any:
        handle = open(directory / ".lock", "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as error:
            handle.close()
            raise StoreError(f"knowledge base '{kb}' in {self.root} is open in another process "
                             f"(embedded shards have one owner; use `babelrag serve` to share one)") from error
        return handle

    def create(self, kb: str, spec: CollectionSpec, manifest: dict[str, Any]) -> EdgeCollection:
        directory = self._dir(kb)
        if self.exists(kb):
            raise StoreError(f"knowledge base '{kb}' already exists in {self.root}")
        directory.mkdir(parents=True, exist_ok=True)
        lock = self._lock(directory, kb)  # before touching anything: another process may be creating it too
        if self.exists(kb):
            fcntl.flock(lock, fcntl.LOCK_UN)
            lock.close()
            raise StoreError(f"knowledge base '{kb}' already exists in {self.root}")
        for leftover in directory.iterdir():  # of a create that failed before its manifest was written
            if leftover.name != ".lock":
                shutil.rmtree(leftover) if leftover.is_dir() else leftover.unlink()
        config = qe.EdgeConfig(
            vectors={DENSE: qe.EdgeVectorParams(size=spec.dim, distance=qe.Distance.Dot)},
            sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
            hnsw_config=qe.HnswIndexConfig(m=spec.hnsw_m, ef_construct=spec.hnsw_ef_construct,
                                           full_scan_threshold=spec.full_scan_threshold_kb,
                                           max_indexing_threads=0))
        shard = qe.EdgeShard.create(str(directory / "shard"), config)
        for field in KEYWORD_FIELDS:
            shard.update(qe.UpdateOperation.create_field_index(field, qe.PayloadSchemaType.Keyword))
        for field in INTEGER_FIELDS:
            shard.update(qe.UpdateOperation.create_field_index(field, qe.PayloadSchemaType.Integer))
        collection = EdgeCollection(kb, directory, shard, lock, spec.hnsw_ef)
        collection.write_manifest(manifest)
        return collection

    def open(self, kb: str) -> EdgeCollection:
        directory = self._dir(kb)
        if not self.exists(kb):
            raise KBNotFound(kb, str(self.root), self.list())
        lock = self._lock(directory, kb)
        try:
            manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
            hnsw_ef = int(manifest.get("collection", {}).get("hnsw_ef", 128))
            shard = qe.EdgeShard.load(str(directory / "shard"))
        except Exception as error:  # a bad manifest or shard: say so, and let go of the lock
            fcntl.flock(lock, fcntl.LOCK_UN)
            lock.close()
            raise StoreError(f"cannot load knowledge base '{kb}': {type(error).__name__}: {error}") from error
        return EdgeCollection(kb, directory, shard, lock, hnsw_ef)

    def replace(self, kb: str, staged: str) -> None:
        """Two renames under both locks: a reader never opens a half-built KB, and a crash in between
        leaves the old one beside (``<kb>.old``) rather than nothing."""
        target, source = self._dir(kb), self._dir(staged)
        locks = [self._lock(target, kb), self._lock(source, staged)]
        retired = target.with_name(target.name + ".old")
        try:
            manifest = json.loads((source / MANIFEST).read_text(encoding="utf-8"))
            manifest["kb"] = kb
            (source / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False), encoding="utf-8")
            if retired.exists():
                shutil.rmtree(retired)
            os.rename(target, retired)
            os.rename(source, target)
        finally:
            for lock in locks:
                fcntl.flock(lock, fcntl.LOCK_UN)
                lock.close()
        shutil.rmtree(retired)

    def drop(self, kb: str) -> None:
        directory = self._dir(kb)
        if not self.exists(kb):
            raise KBNotFound(kb, str(self.root), self.list())
        lock = self._lock(directory, kb)
        try:
            (directory / MANIFEST).unlink()
            shutil.rmtree(directory)
        finally:
            lock.close()
