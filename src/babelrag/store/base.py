"""The store protocol and the factory that picks an adapter from a location string.

A location is a directory (embedded Qdrant Edge, the default), an ``http(s)://`` URL (a Qdrant
server or cluster) or ``:memory:`` (qdrant-client local mode: conformance tests only).
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np

from babelrag.store.schema import ArmHits, ArmQuery, CollectionSpec, Scored, StoredPoint, Where
from babelrag.types import Passage


class Collection(Protocol):
    """One KB's points. Queries take several arms and run them in one engine call."""

    name: str
    recovers: bool
    """This handle may roll back an unfinished write it finds: no other handle in this process writes."""

    def writing(self) -> AbstractContextManager[Any]:
        """Held for the whole of one write (journal, batches, manifest): writes to a KB take turns."""
        ...

    def read_manifest(self) -> dict[str, Any]: ...

    def write_manifest(self, manifest: dict[str, Any]) -> None: ...

    def read_journal(self) -> dict[str, Any] | None:
        """The undo journal of an unfinished write (store/journal.py), if any."""
        ...

    def write_journal(self, journal: dict[str, Any] | None) -> None:
        """Record it durably, or clear it (None)."""
        ...

    def upsert(self, points: Sequence[StoredPoint]) -> None: ...

    def delete(self, where: Where) -> int: ...

    def query(self, arms: Sequence[ArmQuery], where: Where | None, limit: int) -> list[ArmHits]:
        """Each arm's top ``limit`` passages with their scores (and keyword terms where the arm asks)."""
        ...

    def vectors(self, passage_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Each of these passages' stored dense vector (float32; read-only: an adapter may share it between
        searches), for re-scoring a path's candidates. A passage not stored is left out."""
        ...

    def fetch(self, passage_ids: Sequence[str], with_terms: bool = False) -> dict[str, Scored]: ...

    def forget_passages(self) -> None:
        """Drop the decoded passages an adapter keeps between searches, if it keeps any: the next search reads
        every hit's payload, as a cold timing must."""
        ...

    def scroll(self, where: Where | None = None, limit: int | None = None) -> list[Passage]: ...

    def points(self, where: Where | None = None) -> Iterator[StoredPoint]:
        """Matching points in full (payload and both vectors), read a page at a time: to restore or copy them."""
        ...

    def facet(self, key: str, where: Where | None = None) -> dict[str, int]: ...

    def count(self, where: Where | None = None) -> int: ...

    def optimize(self) -> None: ...

    def close(self) -> None: ...


class Store(Protocol):
    location: str

    def list(self) -> list[str]: ...

    def exists(self, kb: str) -> bool: ...

    def manifest(self, kb: str) -> dict[str, Any]:
        """The KB's manifest as stored, read without opening the KB (``KBUnreadable`` if it is not JSON)."""
        ...

    def create(self, kb: str, spec: CollectionSpec, manifest: dict[str, Any],
               journal: dict[str, Any] | None = None) -> Collection:
        """A new KB, its undo ``journal`` (if any) recorded before the KB can be seen."""
        ...

    def open(self, kb: str) -> Collection: ...

    def drop(self, kb: str) -> None: ...

    def replace(self, kb: str, staged: str) -> None:
        """``staged`` (complete) becomes ``kb``; the old ``kb`` is gone only once that has happened."""
        ...


def open_store(location: str) -> Store:
    if location == ":memory:" or location.startswith(("http://", "https://")):
        from babelrag.store.remote import RemoteStore

        return RemoteStore(location)
    from babelrag.store.edge import EdgeStore

    return EdgeStore(location)
