"""The Edge adapter's memory of decoded passages and their terms: it reads only what it lacks, never serves
a passage a write may have changed, and stays within its bound."""
from __future__ import annotations

from babelrag.store.passage_cache import Known, PassageCache
from babelrag.types import Passage


def _passage(point: int, text: str = "") -> Passage:
    return Passage(f"p{point}", text or f"text {point}", f"doc{point}", "en")


class _Shard:
    """Stands in for the engine's payload read, and records what was asked."""

    def __init__(self) -> None:
        self.texts = {point: f"text {point}" for point in range(10)}
        self.asked: list[list[int]] = []

    def read(self, points: list[int]) -> dict[int, Known]:
        self.asked.append(list(points))
        return {point: (_passage(point, self.texts[point]), frozenset({point})) for point in points
                if point in self.texts}


def test_only_points_not_yet_decoded_are_read() -> None:
    cache, shard = PassageCache(), _Shard()
    assert set(cache.passages([1, 2, 3], shard.read)) == {1, 2, 3}
    found = cache.passages([2, 3, 4], shard.read)
    assert shard.asked == [[1, 2, 3], [4]]
    assert [found[p][0].text for p in (2, 3, 4)] == ["text 2", "text 3", "text 4"]


def test_a_point_the_shard_no_longer_has_is_left_out_and_not_remembered() -> None:
    cache, shard = PassageCache(), _Shard()
    del shard.texts[5]
    assert set(cache.passages([4, 5], shard.read)) == {4}
    cache.passages([5], shard.read)
    assert shard.asked == [[4, 5], [5]]


def test_after_a_write_every_passage_is_read_again() -> None:
    cache, shard = PassageCache(), _Shard()
    cache.passages([1, 2], shard.read)
    shard.texts[1] = "changed"
    cache.forget()
    assert cache.passages([1, 2], shard.read)[1][0].text == "changed"
    assert shard.asked == [[1, 2], [1, 2]]


def test_a_read_that_overlapped_a_write_is_not_kept() -> None:
    """The read may have seen the shard before the write changed it: use it for this search, keep none of it."""
    cache, shard = PassageCache(), _Shard()

    def read_while_a_write_lands(points: list[int]) -> dict[int, Known]:
        found = shard.read(points)  # the old text ...
        shard.texts[1] = "changed"  # ... then the write changes the shard and forgets
        cache.forget()
        return found

    assert cache.passages([1], read_while_a_write_lands)[1][0].text == "text 1"
    assert len(cache) == 0
    assert cache.passages([1], shard.read)[1][0].text == "changed"


def test_the_least_recently_used_passages_go_first() -> None:
    cache, shard = PassageCache(capacity=3), _Shard()
    cache.passages([1, 2, 3], shard.read)
    cache.passages([1], shard.read)  # 1 is now the most recent
    cache.passages([4], shard.read)  # over the bound: 2, the least recent, goes
    assert len(cache) == 3
    shard.asked.clear()
    cache.passages([1, 3, 4, 2], shard.read)
    assert shard.asked == [[2]]
