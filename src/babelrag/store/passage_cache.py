"""The decoded passages of an Edge shard's points, and their keyword terms, kept between searches.

Reading and decoding each hit's payload and keyword terms was over a third of the default search's own work
(``benchmarks/latency.py``'s pooled index, query embedded: about 2.5 of 6.5 ms), and the same passages come
back search after search. The cache is exact: a shard belongs to one process (its directory lock), every
write in that process goes through ``EdgeCollection.upsert``/``delete``, and each write forgets everything
once it has changed the shard. A search that read points while a write ran uses what it read (as it would
without the cache) but keeps none of it (the generation moved on), so no stale passage outlives the write
that changed it. The passages are shared by every search that returns them: like every ``Passage``, they
are frozen, and their ``metadata`` is a read-only ``Mapping`` to callers. Bounded by points, least recently
used first; terms are kept as 4-byte ids (a frozenset of them is ten times larger), never made a set per hit.

Beside them, by passage id, the stored dense vectors of the candidates a re-scoring search needed cosines of:
the candidates' cosines are then one product in numpy, not a second engine call per search (about 0.2 ms of the
default's own work). Same bound, same forgetting; about 1.5 KB a vector at 384 dimensions.
"""
from __future__ import annotations

import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

import numpy as np

from babelrag.types import Passage

CAPACITY = 10_000  # points per loaded shard: measured about 2.7 KB each on XQuAD (text, metadata and terms)
# a point's passage, and the term ids of its keyword vector (typecode "I"; None: not read, no search needed them)
Known = tuple[Passage, array | None]


class PassageCache:
    def __init__(self, capacity: int = CAPACITY):
        self.capacity = capacity
        self._passages: OrderedDict[Hashable, Known] = OrderedDict()
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._generation = 0
        self._lock = threading.Lock()

    def passages(self, points: Sequence[Hashable], read: Callable[[list[Hashable]], dict[Hashable, Known]],
                 with_terms: AbstractSet[Hashable]) -> dict[Hashable, Known]:
        """Each point's passage (and terms, for the points in ``with_terms``): from memory, else ``read`` from
        the shard (a point it does not return is gone, and left out). Terms are read only for the points a
        search needs them of (a keyword arm's hits); a later search that needs them reads the point again."""
        return self._through(
            self._passages, points, read,
            usable=lambda point, known: known[1] is not None or point not in with_terms,
            # never drop terms another search just read
            kept=lambda held, known: held if known[1] is None and held and held[1] is not None else known)

    def vectors(self, passage_ids: Sequence[str], read: Callable[[list[str]], dict[str, np.ndarray]]
                ) -> dict[str, np.ndarray]:
        """Each passage's stored dense vector: from memory, else ``read`` from the shard (a passage it does not
        return is gone, and left out)."""
        return self._through(self._vectors, passage_ids, read, usable=lambda key, vector: True,
                             kept=lambda held, vector: vector)

    def _through(self, memory: OrderedDict, keys: Sequence[Any], read: Callable[[list[Any]], dict[Any, Any]],
                 usable: Callable[[Any, Any], bool], kept: Callable[[Any, Any], Any]) -> dict[Any, Any]:
        """What ``memory`` holds of ``keys`` and is ``usable``, the rest from ``read``. What was read is kept
        (``kept(held, fresh)`` decides against what is held) only when no write ran since the read began; the
        least recently used go past the bound."""
        with self._lock:
            found = {}
            for key in keys:
                held = memory.get(key)
                if held is not None and usable(key, held):
                    memory.move_to_end(key)
                    found[key] = held
            generation = self._generation
        missing = [key for key in keys if key not in found]
        if missing:
            fresh = read(missing)
            with self._lock:
                if generation == self._generation:  # no write since the read began: these are current
                    for key, value in fresh.items():
                        memory[key] = kept(memory.get(key), value)
                    while len(memory) > self.capacity:
                        memory.popitem(last=False)
            found.update(fresh)
        return found

    def forget(self) -> None:
        """After a write: nothing kept before it is served again, nor anything read while it ran."""
        with self._lock:
            self._generation += 1
            self._passages.clear()
            self._vectors.clear()

    def __len__(self) -> int:
        return len(self._passages)
