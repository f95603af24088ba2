"""The Edge adapter's memory of decoded passages and their terms: it reads only what it lacks, never serves
a passage a write may have changed, and stays within its bound."""
from __future__ import annotations

from array import array
from pathlib import Path

import numpy as np
import pytest

from babelrag.retrieve import bm25
from babelrag.store.base import open_store
from babelrag.store.passage_cache import Known, PassageCache
from babelrag.store.schema import DENSE, SPARSE, ArmQuery, CollectionSpec, Match, StoredPoint, Where
from babelrag.types import Passage


TERMS_OF_ALL = set(range(10))  # every point's terms wanted


def _passage(point: int, text: str = "") -> Passage:
    return Passage(f"p{point}", text or f"text {point}", f"doc{point}", "en")


class _Shard:
    """Stands in for the engine's payload read, and records what was asked."""

    def __init__(self) -> None:
        self.texts = {point: f"text {point}" for point in range(10)}
        self.asked: list[list[int]] = []

    def read(self, points: list[int], with_terms: bool = True) -> dict[int, Known]:
        self.asked.append(list(points))
        return {point: (_passage(point, self.texts[point]), array("I", [point]) if with_terms else None)
                for point in points if point in self.texts}


def test_only_points_not_yet_decoded_are_read() -> None:
    cache, shard = PassageCache(), _Shard()
    assert set(cache.passages([1, 2, 3], shard.read, TERMS_OF_ALL)) == {1, 2, 3}
    found = cache.passages([2, 3, 4], shard.read, TERMS_OF_ALL)
    assert shard.asked == [[1, 2, 3], [4]]
    assert [found[p][0].text for p in (2, 3, 4)] == ["text 2", "text 3", "text 4"]


def test_terms_are_read_only_when_a_search_needs_them() -> None:
    cache, shard = PassageCache(), _Shard()
    assert cache.passages([1, 2], lambda points: shard.read(points, with_terms=False), set())[1][1] is None
    assert cache.passages([1, 2], shard.read, set())[1][1] is None and shard.asked == [[1, 2]]  # enough as read
    assert list(cache.passages([2, 3], shard.read, {2})[2][1]) == [2]  # 2 read again, with terms
    cache.passages([1, 2, 3], shard.read, {2})
    assert shard.asked == [[1, 2], [2, 3]]


def test_a_read_without_terms_does_not_drop_terms_another_search_just_read() -> None:
    cache, shard = PassageCache(), _Shard()

    def dense_only_read_overtaken_by_a_keyword_search(points: list[int]) -> dict[int, Known]:
        found = shard.read(points, with_terms=False)
        cache.passages(points, shard.read, set(points))  # meanwhile, a keyword search reads them with terms
        return found

    cache.passages([1], dense_only_read_overtaken_by_a_keyword_search, set())
    shard.asked.clear()
    assert list(cache.passages([1], shard.read, {1})[1][1]) == [1] and shard.asked == []


def test_a_point_the_shard_no_longer_has_is_left_out_and_not_remembered() -> None:
    cache, shard = PassageCache(), _Shard()
    del shard.texts[5]
    assert set(cache.passages([4, 5], shard.read, TERMS_OF_ALL)) == {4}
    cache.passages([5], shard.read, TERMS_OF_ALL)
    assert shard.asked == [[4, 5], [5]]


def test_after_a_write_every_passage_is_read_again() -> None:
    cache, shard = PassageCache(), _Shard()
    cache.passages([1, 2], shard.read, TERMS_OF_ALL)
    shard.texts[1] = "changed"
    cache.forget()
    assert cache.passages([1, 2], shard.read, TERMS_OF_ALL)[1][0].text == "changed"
    assert shard.asked == [[1, 2], [1, 2]]


def test_a_read_that_overlapped_a_write_is_not_kept() -> None:
    """The read may have seen the shard before the write changed it: use it for this search, keep none of it."""
    cache, shard = PassageCache(), _Shard()

    def read_while_a_write_lands(points: list[int]) -> dict[int, Known]:
        found = shard.read(points)  # the old text ...
        shard.texts[1] = "changed"  # ... then the write changes the shard and forgets
        cache.forget()
        return found

    assert cache.passages([1], read_while_a_write_lands, TERMS_OF_ALL)[1][0].text == "text 1"
    assert len(cache) == 0
    assert cache.passages([1], shard.read, TERMS_OF_ALL)[1][0].text == "changed"


def test_the_least_recently_used_passages_go_first() -> None:
    cache, shard = PassageCache(capacity=3), _Shard()
    cache.passages([1, 2, 3], shard.read, TERMS_OF_ALL)
    cache.passages([1], shard.read, TERMS_OF_ALL)  # 1 is now the most recent
    cache.passages([4], shard.read, TERMS_OF_ALL)  # over the bound: 2, the least recent, goes
    assert len(cache) == 3
    shard.asked.clear()
    cache.passages([1, 3, 4, 2], shard.read, TERMS_OF_ALL)
    assert shard.asked == [[2]]


def test_vectors_are_read_once_forgotten_on_a_write_and_not_kept_from_a_read_it_overlapped() -> None:
    cache, stored, asked = PassageCache(capacity=2), {"a": np.ones(2), "b": np.zeros(2)}, []

    def read(ids: list[str]) -> dict[str, np.ndarray]:
        asked.append(list(ids))
        return {pid: stored[pid] for pid in ids if pid in stored}

    assert set(cache.vectors(["a", "b", "gone"], read)) == {"a", "b"}
    assert set(cache.vectors(["a", "b"], read)) == {"a", "b"} and asked == [["a", "b", "gone"]]
    stored["a"] = np.full(2, 2.0)
    cache.forget()
    assert cache.vectors(["a"], read)["a"][0] == 2.0

    def read_while_a_write_lands(ids: list[str]) -> dict[str, np.ndarray]:
        found = read(ids)
        stored["b"] = np.full(2, 3.0)
        cache.forget()
        return found

    assert cache.vectors(["b"], read_while_a_write_lands)["b"][0] == 0.0  # this search uses what it read ...
    assert cache.vectors(["b"], read)["b"][0] == 3.0  # ... and the next one reads again
    cache.vectors(["a"], read)  # held now: b, then a
    cache.vectors(["b"], read)  # served from memory, and now the most recently used
    cache.vectors(["c"], lambda ids: {pid: np.ones(2) for pid in ids})  # over the bound: a goes
    asked.clear()
    cache.vectors(["b", "c"], read)
    assert asked == []
    cache.vectors(["a"], read)
    assert asked == [["a"]]


class _CountsReads:
    """The engine shard, counting payload reads; ``during_update`` runs while a write is under way."""

    def __init__(self, shard) -> None:
        self._shard, self.reads, self.during_update = shard, 0, None
        self.asked: list[tuple[int, bool]] = []  # per payload read: how many points, whether with their terms

    def __getattr__(self, name: str):
        return getattr(self._shard, name)

    def retrieve(self, ids, **options):
        self.reads += 1
        self.asked.append((len(ids), bool(options.get("with_vector"))))
        return self._shard.retrieve(ids, **options)

    def update(self, operation):  # a search may run just before the engine's change and just after it
        if self.during_update is not None:
            self.during_update()
        result = self._shard.update(operation)
        if self.during_update is not None:
            self.during_update()
        return result


@pytest.fixture
def edge(tmp_path: Path):
    collection = open_store(str(tmp_path / "store")).create("kb", CollectionSpec(dim=4), {"kb": "kb"})
    collection.upsert([StoredPoint(Passage(f"p{i}", f"text {i}", f"doc{i}", "en", record_id=f"p{i}"),
                                   np.eye(4, dtype=np.float32)[i], bm25.document_vector([f"word{i}"], 1.0))
                       for i in range(4)])
    collection._shard = _CountsReads(collection._shard)
    yield collection
    collection._shard = collection._shard._shard
    collection.close()


def _texts(collection) -> list[str]:
    (hits,) = collection.query([ArmQuery(DENSE, dense=np.ones(4, dtype=np.float32))], None, 10)
    return sorted(h.passage.text for h in hits)


def test_a_repeated_search_reads_no_payload_until_the_passages_are_forgotten(edge) -> None:
    _texts(edge)
    _texts(edge)
    assert edge._shard.reads == 1
    edge.forget_passages()  # as a cold timing does before each question
    _texts(edge)
    assert edge._shard.reads == 2


def test_only_a_keyword_arms_hits_are_read_with_their_terms(edge) -> None:
    (dense, keyword) = edge.query([ArmQuery(DENSE, dense=np.ones(4, dtype=np.float32)),
                                   ArmQuery(SPARSE, sparse=bm25.query_vector(["word2"]), with_terms=True)], None, 10)
    assert len(dense) == 4 and [h.passage.id for h in keyword] == ["p2"] and keyword[0].terms
    assert sorted(edge._shard.asked) == [(1, True), (3, False)]


def test_a_search_in_the_middle_of_a_write_leaves_nothing_stale(edge) -> None:
    """Searches while a write runs read the old or the new passage; the first search after it, the new one."""
    edge._shard.during_update = lambda: _texts(edge)
    edge.upsert([StoredPoint(Passage("p1", "changed", "doc1", "en", record_id="p1"), np.eye(4, dtype=np.float32)[1],
                             bm25.document_vector(["word1"], 1.0))])
    edge._shard.during_update = None
    assert _texts(edge) == ["changed", "text 0", "text 2", "text 3"]


def test_a_write_that_fails_still_forgets(edge) -> None:
    _texts(edge)

    def fails() -> None:
        raise RuntimeError("disk full")

    edge._shard.during_update = fails
    with pytest.raises(RuntimeError):
        edge.delete(Where(must=(Match("record_id", ("p2",)),)))
    assert len(edge._loaded.passages) == 0
