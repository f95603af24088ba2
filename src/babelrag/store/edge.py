"""Embedded Qdrant Edge: the Qdrant Rust engine in-process, one shard directory per KB.

A shard belongs to one process at a time: its directory is locked (``flock``, with the owner's pid in
the lock file) while the process has it open, and another process gets a clear message naming that
pid instead of a corrupted shard. Within the process a shard is loaded once and shared: every
``open`` of the KB — the service's, a ``babelrag.open_kb`` handle, two LlamaIndex retrievers, an
``index`` call — is a handle on the same loaded shard, counted, and the shard closes with the last
handle. Writes through any handle are serialised (``writing``); readers see what the engine holds (the
decoded passages a search keeps, ``PassageCache``, are forgotten by every write once it has changed the shard).
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import threading
import uuid
from array import array
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from babelrag import deadline
from babelrag.errors import KBNotFound, KBUnreadable, StoreError, StoreHeld
from babelrag.store.passage_cache import Known, PassageCache
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
    passage_of,
    payload_of,
    point_id,
    scored_of,
    scroll_pages,
    scroll_points,
    staging_name,
    term_indices,
)
from babelrag.types import Passage

MANIFEST = "manifest.json"
JOURNAL = "ingest.journal.json"
RELEASE_WAIT = 30.0  # seconds a drop waits for this process's other handles to close


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
        return qe.Query.Nearest(np.asarray(arm.dense).tolist(), using=DENSE)
    return qe.Query.Nearest(qe.SparseVector(list(arm.sparse.indices), list(arm.sparse.values)), using=SPARSE)


class _Loaded:
    """A shard loaded in this process, with its directory lock, its manifest (one dict, so a write through
    one handle is what every other handle reads), its write lock and how many handles use it."""

    def __init__(self, shard: qe.EdgeShard, lock_handle: Any, manifest: dict[str, Any]):
        self.shard, self.lock_handle, self.manifest = shard, lock_handle, manifest
        self.hnsw_ef = int((manifest.get("collection") or {}).get("hnsw_ef", 128))
        self.writes = threading.RLock()
        self.passages = PassageCache()
        self.users = 1


_loaded: dict[Path, _Loaded] = {}
_registry = threading.Condition()  # guards _loaded and the counts; notified when a shard closes


def _write_json(path: Path, value: Any, sync: bool = False) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(value, handle, indent=2 if not sync else None, ensure_ascii=False)
        if sync:
            handle.flush()
            os.fsync(handle.fileno())
    os.replace(tmp, path)


class EdgeCollection:
    """A handle on a shard loaded in this process. ``recovers``: this handle loaded it (no other handle in
    the process had it open), so an unfinished write found in it is a dead one's, safe to roll back."""

    def __init__(self, name: str, directory: Path, loaded: _Loaded, recovers: bool):
        self.name, self._dir, self._loaded, self.recovers = name, directory, loaded, recovers
        self._shard: qe.EdgeShard | None = loaded.shard
        self._hnsw_ef = loaded.hnsw_ef

    def writing(self) -> AbstractContextManager[Any]:
        """Held for a whole write (a journal, its batches, the manifest): one write at a time per KB."""
        return self._loaded.writes

    def read_manifest(self) -> dict[str, Any]:
        return self._loaded.manifest

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        with self._loaded.writes:
            _write_json(self._dir / MANIFEST, manifest)
            shared = self._loaded.manifest
            if manifest is not shared:  # updated in place (never emptied): other handles read it meanwhile
                shared.update(json.loads(json.dumps(manifest)))
                for key in set(shared) - set(manifest):
                    del shared[key]

    def read_journal(self) -> dict[str, Any] | None:
        path = self._dir / JOURNAL
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None

    def write_journal(self, journal: dict[str, Any] | None) -> None:
        if journal is None:
            (self._dir / JOURNAL).unlink(missing_ok=True)
            return
        _write_json(self._dir / JOURNAL, journal, sync=True)

    def upsert(self, points: Sequence[StoredPoint]) -> None:
        with self._loaded.writes:
            try:
                self._shard.update(qe.UpdateOperation.upsert_points([
                    qe.Point(p.point_id, {DENSE: [float(x) for x in p.dense],
                                          SPARSE: qe.SparseVector(list(p.sparse.indices), list(p.sparse.values))},
                             payload_of(p.passage))
                    for p in points]))
                self._shard.flush()
            finally:  # even a failed write may have changed some points
                self._loaded.passages.forget()

    def delete(self, where: Where) -> int:
        with self._loaded.writes:
            before = self.count()
            try:
                self._shard.update(qe.UpdateOperation.delete_points_by_filter(_filter(where)))
                self._shard.flush()
            finally:  # a deleted point is never a hit again; this frees its memory
                self._loaded.passages.forget()
            return before - self.count()

    def query(self, arms: Sequence[ArmQuery], where: Where | None, limit: int) -> list[ArmHits]:
        """Two engine calls: every arm's hits (ids, scores), then each distinct hit's payload and keyword terms
        once, unless an earlier search decoded them (``PassageCache``); a point deleted between the calls is
        left out, and still counted as returned. Reading and decoding them is most of a search's engine time
        (about 10 µs a point for the payload and 10 µs for the terms, against 0.4 ms for both arms' search, on
        ``benchmarks/latency.py``'s pooled index), and the same passages come back search after search."""
        deadline.check("searching the index")
        flt = _filter(where)
        requests = [qe.QueryRequest(limit=arm.limit or limit, query=_query(arm), filter=flt, with_payload=False, with_vector=False,
                                    params=qe.SearchParams(hnsw_ef=self._hnsw_ef) if arm.arm == DENSE else None)
                    for arm in arms]
        answers = self._shard.query_batch(qe.QueryBatchRequest(requests))
        # each ``.id`` read builds a Python UUID, whose hash is computed in Python: read once per point and keyed
        # by its number from here on (a search looks each point up several times)
        found = [[(p.id.int, p.score) for p in points] for points in answers]
        distinct = list(dict.fromkeys(point for hits in found for point, _ in hits))
        with_terms = {point for arm, hits in zip(arms, found) if arm.with_terms for point, _ in hits}
        known = self._loaded.passages.passages(distinct, lambda missing: self._read_points(missing, with_terms),
                                               with_terms)
        return [ArmHits(tuple(Scored(known[point][0], float(score), known[point][1] if arm.with_terms else None)
                              for point, score in hits if point in known), len(hits))
                for arm, hits in zip(arms, found, strict=True)]

    def _read_points(self, points: list[int], with_terms: AbstractSet[int]) -> dict[int, Known]:
        """Each point's passage (points by their UUID's number), and its keyword terms when it is in ``with_terms``
        (one engine call for each kind of point present)."""
        plain = [uuid.UUID(int=point) for point in points if point not in with_terms]
        known: dict[int, Known] = {record.id.int: (passage_of(record.payload), None) for record in
                                   (self._shard.retrieve(plain, with_payload=True, with_vector=False) if plain else [])}
        termed = [uuid.UUID(int=point) for point in points if point in with_terms]
        for record in self._shard.retrieve(termed, with_payload=True, with_vector=TERMS) if termed else []:
            known[record.id.int] = (passage_of(record.payload), array("I", term_indices(record) or ()))
        return known

    def vectors(self, passage_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """From the stored vectors kept between searches (``PassageCache.vectors``): a re-scoring search's
        candidates come back search after search, so this is mostly no engine call at all."""
        if not passage_ids:
            return {}
        deadline.check("scoring the candidates")
        return self._loaded.passages.vectors(list(dict.fromkeys(passage_ids)), self._read_vectors)

    def _read_vectors(self, passage_ids: list[str]) -> dict[str, np.ndarray]:
        """The stored dense vectors of these passages (one engine call); a passage not stored is left out."""
        by_point = {point_id(pid): pid for pid in passage_ids}
        records = self._shard.retrieve(list(by_point), with_payload=False, with_vector=[DENSE])
        vectors = {by_point[str(record.id)]: np.asarray(record.vector[DENSE], dtype=np.float32) for record in records}
        for vector in vectors.values():  # shared by every later search: read-only
            vector.setflags(write=False)
        return vectors

    def forget_passages(self) -> None:
        self._loaded.passages.forget()

    def fetch(self, passage_ids: Sequence[str], with_terms: bool = False) -> dict[str, Scored]:
        records = self._shard.retrieve([point_id(pid) for pid in passage_ids], with_payload=True,
                                       with_vector=TERMS if with_terms else False)
        return {s.passage.id: s for s in (scored_of(r, 0.0, with_terms) for r in records)}

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
        with self._loaded.writes:
            while self._shard.optimize():
                pass

    def close(self) -> None:
        """Let go of this handle; the last one in the process closes the shard and its lock."""
        if self._shard is None:
            return
        self._shard = None
        with _registry:
            self._loaded.users -= 1
            if self._loaded.users == 0:
                del _loaded[self._dir]
                _release(self._loaded)
                _registry.notify_all()


def _release(loaded: _Loaded) -> None:
    loaded.shard.flush()
    loaded.shard.close()
    fcntl.flock(loaded.lock_handle, fcntl.LOCK_UN)
    loaded.lock_handle.close()


class EdgeStore:
    def __init__(self, location: str):
        self.location = location
        self.root = Path(location).expanduser()

    def _dir(self, kb: str) -> Path:
        return self.root.resolve() / check_store_name(kb)

    def list(self) -> list[str]:
        """The KBs (babelrag's own staging areas are not listed)."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if (p / MANIFEST).is_file() and not is_staging_name(p.name))

    def exists(self, kb: str) -> bool:
        return (self._dir(kb) / MANIFEST).is_file()

    def manifest(self, kb: str) -> dict[str, Any]:
        directory = self._dir(kb)
        if not self.exists(kb):
            raise KBNotFound(kb, str(self.root), self.list())
        return _manifest_of(directory, kb)

    def _lock(self, directory: Path, kb: str) -> Any:
        """The directory's lock for this process, with its pid written in (another process names it)."""
        handle = open(directory / ".lock", "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as error:
            handle.seek(0)
            owner = handle.read().strip()
            handle.close()
            raise StoreHeld(f"knowledge base '{kb}' in {self.root} is open in another process"
                            f"{f' (pid {owner})' if owner.isdigit() else ''} (embedded shards have one owner "
                            f"process; use `babelrag serve` to share one)", int(owner) if owner.isdigit() else None) \
                from error
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        return handle

    def create(self, kb: str, spec: CollectionSpec, manifest: dict[str, Any],
               journal: dict[str, Any] | None = None) -> EdgeCollection:
        """``journal`` is on disk before the manifest, so no handle ever sees the new KB without it."""
        directory = self._dir(kb)
        with _registry:
            if directory in _loaded or self.exists(kb):
                raise StoreError(f"knowledge base '{kb}' already exists in {self.root}")
            directory.mkdir(parents=True, exist_ok=True)
            lock = self._lock(directory, kb)  # before touching anything: another process may be creating it too
            try:
                if self.exists(kb):
                    raise StoreError(f"knowledge base '{kb}' already exists in {self.root}")
                for leftover in directory.iterdir():  # of a create that failed before its manifest was written
                    if leftover.name != ".lock":
                        shutil.rmtree(leftover) if leftover.is_dir() else leftover.unlink()
                shard = qe.EdgeShard.create(str(directory / "shard"), _config(spec))
            except BaseException:
                fcntl.flock(lock, fcntl.LOCK_UN)
                lock.close()
                raise
            for field in KEYWORD_FIELDS:
                shard.update(qe.UpdateOperation.create_field_index(field, qe.PayloadSchemaType.Keyword))
            for field in INTEGER_FIELDS:
                shard.update(qe.UpdateOperation.create_field_index(field, qe.PayloadSchemaType.Integer))
            loaded = _loaded[directory] = _Loaded(shard, lock, manifest)
            loaded.hnsw_ef = spec.hnsw_ef
            collection = EdgeCollection(kb, directory, loaded, recovers=True)
            if journal is not None:
                collection.write_journal(journal)
            collection.write_manifest(manifest)
        return collection

    def open(self, kb: str) -> EdgeCollection:
        directory = self._dir(kb)
        with _registry:
            if directory in _loaded:
                _loaded[directory].users += 1
                return EdgeCollection(kb, directory, _loaded[directory], recovers=False)
            if not self.exists(kb):
                raise KBNotFound(kb, str(self.root), self.list())
            lock = self._lock(directory, kb)
            try:
                loaded = _Loaded(qe.EdgeShard.load(str(directory / "shard")), lock, _manifest_of(directory, kb))
            except KBUnreadable:
                fcntl.flock(lock, fcntl.LOCK_UN)
                lock.close()
                raise
            except Exception as error:  # a shard the engine cannot load: say so, and let go of the lock
                fcntl.flock(lock, fcntl.LOCK_UN)
                lock.close()
                raise KBUnreadable(kb, f"shard: {type(error).__name__}: {error}") from error
            _loaded[directory] = loaded
            return EdgeCollection(kb, directory, loaded, recovers=True)

    def _unused(self, directory: Path, kb: str) -> None:
        """Wait (holding the registry) until no handle in this process has ``directory`` open."""
        if not _registry.wait_for(lambda: directory not in _loaded, timeout=RELEASE_WAIT):
            raise StoreError(f"knowledge base '{kb}' is still open in this process; close it first")

    def replace(self, kb: str, staged: str) -> None:
        """Two renames under both locks: a reader never opens a half-built KB, and a crash in between
        leaves the old one aside (under the internal name ``_retired.<kb>``) rather than nothing."""
        target, source = self._dir(kb), self._dir(staged)
        retired = self._dir(staging_name(kb, "retired"))
        with _registry:
            for directory, name in ((target, kb), (source, staged)):
                if directory in _loaded:
                    raise StoreError(f"knowledge base '{name}' is open in this process; close it before "
                                     f"rebuilding it")
            locks = [self._lock(target, kb), self._lock(source, staged)]
            try:
                manifest = json.loads((source / MANIFEST).read_text(encoding="utf-8"))
                manifest["kb"] = kb
                _write_json(source / MANIFEST, manifest)
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
        with _registry:
            self._unused(directory, kb)
            if not self.exists(kb):
                raise KBNotFound(kb, str(self.root), self.list())
            lock = self._lock(directory, kb)
            try:
                (directory / MANIFEST).unlink()
                shutil.rmtree(directory)
            finally:
                lock.close()


def _manifest_of(directory: Path, kb: str) -> dict[str, Any]:
    try:
        manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
        if not isinstance(manifest, dict):
            raise ValueError("not a JSON object")
        int((manifest.get("collection") or {}).get("hnsw_ef", 128))
    except (ValueError, TypeError, AttributeError, OSError) as error:  # JSONDecodeError is a ValueError
        raise KBUnreadable(kb, f"manifest: {error}") from error
    return manifest


def _config(spec: CollectionSpec) -> qe.EdgeConfig:
    return qe.EdgeConfig(
        vectors={DENSE: qe.EdgeVectorParams(size=spec.dim, distance=qe.Distance.Dot)},
        sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        hnsw_config=qe.HnswIndexConfig(m=spec.hnsw_m, ef_construct=spec.hnsw_ef_construct,
                                       full_scan_threshold=spec.full_scan_threshold_kb, max_indexing_threads=0))
