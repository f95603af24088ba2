"""An undo journal for writes, so a process killed mid-ingest leaves the KB as it was before.

Before an ingest writes, it records which records it is about to replace and the points they had
(or that it created the KB). The journal is cleared when the write is complete. Opening a KB that
still holds a journal rolls the unfinished write back: the records' new points are deleted and the
old ones written again — or a KB the write created is dropped.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from babelrag.errors import KBUnreadable
from babelrag.store.base import Collection
from babelrag.store.schema import Match, SparseTerms, StoredPoint, Where, passage_of, payload_of


def creating(record_ids: Sequence[str] = ()) -> dict[str, Any]:
    """The journal of a write that creates its KB (handed to ``Store.create``): undone, the KB goes."""
    return {"record_ids": list(record_ids), "created": True, "before": []}


def begin(collection: Collection, record_ids: Sequence[str], before: Sequence[StoredPoint]) -> dict[str, Any]:
    """Record what a write into an existing KB replaces, before it writes."""
    journal = {"record_ids": list(record_ids), "created": False, "before": [
        {"payload": payload_of(p.passage), "dense": [float(x) for x in p.dense], "indices": list(p.sparse.indices),
         "values": list(p.sparse.values)} for p in before]}
    collection.write_journal(journal)
    return journal


def end(collection: Collection) -> None:
    collection.write_journal(None)


def undo(collection: Collection, journal: dict[str, Any]) -> None:
    """Put back what the unfinished write replaced (its own points go)."""
    ids = tuple(journal["record_ids"])
    for start in range(0, len(ids), 256):
        collection.delete(Where(must=(Match("record_id", ids[start:start + 256]),)))
    before = [StoredPoint(passage_of(p["payload"]), np.asarray(p["dense"], dtype=np.float32),
                          SparseTerms(tuple(p["indices"]), tuple(p["values"]))) for p in journal["before"]]
    for start in range(0, len(before), 256):
        collection.upsert(before[start:start + 256])
    end(collection)


def pending(collection: Collection) -> dict[str, Any] | None:
    """The unfinished write's journal, or None; a damaged journal is ``KBUnreadable`` (its KB alone)."""
    try:
        journal = collection.read_journal()
        if journal is not None and not (isinstance(journal, dict) and isinstance(journal.get("record_ids"), list)
                                        and isinstance(journal.get("before"), list)):
            raise ValueError("not an undo journal")
    except (ValueError, TypeError, OSError) as error:  # JSONDecodeError is a ValueError
        raise KBUnreadable(collection.name, f"journal: {error}") from error
    return journal
