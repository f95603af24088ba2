"""Fusing rankings: one path's retrieval arms (``fuse_arms``), and the paths of multi-path strategies (``fuse``)
(docs/methods.md#merge).

- ``max``: each passage keeps its best score. Only meaningful on one scale; rankings from
  different scorers are min-max normalised first (and the result says so in its scorer name).
- ``rrf``: Σ 1/(k + rank), ranks from 1, scores ignored (Cormack et al. 2009).
- ``zscore``: per-ranking z-scores summed (CombSUM over standardised scores), each ranking
  standardised over every candidate of the fusion. A passage a ranking did not return counts as
  0 when that ranking is ``complete`` (BM25 returns every passage sharing a query term, so the
  others truly score 0), else as the ranking's lowest score ("no better than its worst"). So one
  keyword hit stands out from the rest (its z is large) instead of getting z = 0, and two hits
  keep the gap between their BM25 scores.
Ties break by best rank, then by ranking order. A path's arms fuse into candidates that keep every arm's
signals; across paths each passage keeps those of its best hit. Both number their candidates once, in order of
first appearance, and score them as arrays over those numbers.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from babelrag.store.schema import DENSE, SPARSE, Scored
from babelrag.types import Hit, Ranking, fusion_z_signal

FUSION_Z_SIGNALS = (fusion_z_signal(DENSE), fusion_z_signal(SPARSE))  # the arm z-scores ``fuse_arms`` leaves


@dataclass(frozen=True, slots=True)
class Arm:
    """One retrieval arm of a path as the engine returned it, best first: each hit with its 1-based rank in the arm
    as returned (kept when a hit drops out). A path's arms are fused straight from these, so a candidate gets one
    Hit, not one per arm that found it."""

    label: str
    signal: str  # the arm (``dense``, ``bm25``): what its score and ``<arm>_rank`` are called in a hit's signals
    hits: Sequence[Scored]
    ranks: Sequence[int]

    @property
    def scorer(self) -> str:
        return {DENSE: "cosine", SPARSE: "bm25"}.get(self.signal, self.signal)

    def add_signals(self, signals: list[dict[str, float]], candidates: list[int],
                    rescored: Mapping[str, Mapping[str, float]] | None) -> None:
        """Each hit's signals written into ``signals`` (one dict per candidate; ``candidates``: each hit's candidate
        number), in place, so fused candidates need no dict per hit to merge: the arm's score and rank, and with
        ``rescored`` what re-scoring reads of the hit (its cosine to the path's re-scoring text and the centered one, ``search._rescored``)."""
        score, rank = self.signal, f"{self.signal}_rank"
        for i, s, r in zip(candidates, self.hits, self.ranks, strict=True):
            own = signals[i]
            own[score] = s.score
            own[rank] = r
            if rescored is not None:
                own.update(rescored[s.passage.id])

    def ranking(self, rescored: Mapping[str, Mapping[str, float]] | None, label: str | None = None) -> Ranking:
        """The arm alone, as a path's ranking (a path with one arm)."""
        signals: list[dict[str, float]] = [{} for _ in self.hits]
        self.add_signals(signals, list(range(len(self.hits))), rescored)
        hits = [Hit(s.passage, s.score, self.label, s.terms, own) for s, own in zip(self.hits, signals)]
        return Ranking(label or self.label, self.scorer, tuple(hits))

    def to_trace(self, limit: int) -> dict[str, object]:
        """As ``Ranking.to_trace``."""
        return {"label": self.label, "scorer": self.scorer,
                "hits": [[s.passage.id, round(float(s.score), 5)] for s in self.hits[:limit]]}


def _minmax(scores: np.ndarray) -> np.ndarray:
    span = scores.max() - scores.min()
    return (scores - scores.min()) / span if span > 0 else np.ones_like(scores)


def _zscores(scores: np.ndarray, positions: np.ndarray, size: int, complete: bool) -> np.ndarray:
    """z over all ``size`` candidates (a ranking's hits at ``positions``); the ones it did not return get 0
    (complete) or its lowest score."""
    values = np.full(size, 0.0 if complete else scores.min())
    values[positions] = scores
    std = values.std()
    return (values - values.mean()) / std if std > 0 else np.zeros(size)


def _weighted(scores: Sequence[np.ndarray], weights: Sequence[float], same_scale: bool) -> list[np.ndarray]:
    """What ``max`` compares: each ranking's scores, min-max normalised first when the scales differ."""
    return [w * (own if same_scale else _minmax(own)) for w, own in zip(weights, scores)]


def _totals(method: str, size: int, positions: Sequence[np.ndarray], scores: Sequence[np.ndarray],
            weights: Sequence[float], flags: Sequence[bool], rrf_k: int, same_scale: bool) -> np.ndarray:
    """Every candidate's fused score (``positions[j]``: ranking j's hits as candidate numbers)."""
    if method == "rrf":
        totals = np.zeros(size)
        for w, where in zip(weights, positions):
            np.add.at(totals, where, w / (rrf_k + np.arange(1, len(where) + 1)))
    elif method == "max":
        totals = np.full(size, -np.inf)
        for where, weighted in zip(positions, _weighted(scores, weights, same_scale)):
            np.fmax.at(totals, where, weighted)  # a NaN never wins, as in ``fuse``'s loop
    elif method == "zscore":
        totals = np.zeros(size)
        for w, where, own, flag in zip(weights, positions, scores, flags):
            totals += w * _zscores(own, where, size, flag)
    else:
        raise ValueError(f"unknown fusion method '{method}'")
    return totals


def _order(totals: np.ndarray, best_rank: list[tuple[int, int]]) -> list[int]:
    """Candidates by fused score, ties by best rank, then by the ranking that gave it."""
    ranks = np.array(best_rank, dtype=np.intp)
    return np.lexsort((ranks[:, 1], ranks[:, 0], -totals)).tolist()


def _scorer(method: str, scorers: Sequence[str]) -> str:
    same_scale = len(set(scorers)) == 1
    return (scorers[0] if same_scale else "max-minmax") if method == "max" else method


def _kept(weights: Sequence[float] | None, complete: Sequence[bool] | None,
          nonempty: list[int]) -> tuple[list[float], list[bool]]:
    """The weights and completeness of the rankings that returned something (empty ones drop out with theirs)."""
    every = list(weights) if weights is not None else None
    return ([every[i] if every is not None else 1.0 for i in nonempty],
            [bool(complete[i]) if complete is not None else False for i in nonempty])


def _numbered(rankings: Sequence[Sequence[Scored | Hit]]) -> tuple[list[tuple[int, int]], list[np.ndarray],
                                                                     list[tuple[int, int]]]:
    """Candidates numbered once, in order of first appearance: for each, the hit that stands for it as (ranking,
    index) — its first, or the first that carries keyword terms — and its (best rank, the ranking that gave it);
    and each ranking's hits as candidate numbers."""
    number: dict[str, int] = {}
    kept: list[tuple[int, int]] = []
    best_rank: list[tuple[int, int]] = []
    positions = []
    for order, hits in enumerate(rankings):
        mine = []
        for index, hit in enumerate(hits):
            i = number.setdefault(hit.passage.id, len(kept))
            mine.append(i)
            if i == len(kept):
                kept.append((order, index))
                best_rank.append((index + 1, order))
                continue
            if hit.terms is not None and rankings[kept[i][0]][kept[i][1]].terms is None:
                kept[i] = (order, index)
            best_rank[i] = min(best_rank[i], (index + 1, order))
        positions.append(np.array(mine, dtype=np.intp))
    return kept, positions, best_rank


def fuse_arms(arms: Sequence[Arm], method: str, label: str, rescored: Mapping[str, Mapping[str, float]] | None = None,
              rrf_k: int = 60, weights: Sequence[float] | None = None,
              complete: Sequence[bool] | None = None) -> Ranking:
    """One path's candidates from its arms: each keeps every arm's signals (with ``rescored``, what re-scoring reads
    of it, which every hit must have), the fused score as signal ``method``, and each arm's z-score as z-score fusion
    computes it, unweighted, as signal ``fusion_z_signal(arm)`` whatever the method (the learned stage ranks monolingual
    paths by the hybrid preset's own order, which must not move with this search's fusion settings); its hit is the
    first arm's that found it, or the first that carries keyword terms. ``complete[i]``: arm i returned every
    passage its scorer scores above zero (fewer than asked)."""
    nonempty = [i for i, arm in enumerate(arms) if arm.hits]
    weights, flags = _kept(weights, complete, nonempty)
    arms = [arms[i] for i in nonempty]
    if not arms:
        return Ranking(label, method)
    if len(arms) == 1 and method == "max":
        return arms[0].ranking(rescored, label)
    kept, positions, best_rank = _numbered([arm.hits for arm in arms])
    signals: list[dict[str, float]] = [{} for _ in kept]  # per candidate: every arm's signals, in arm order
    for arm, where in zip(arms, positions):
        arm.add_signals(signals, where.tolist(), rescored)
    scorers = [arm.scorer for arm in arms]
    scores = [np.array([hit.score for hit in arm.hits], dtype=np.float64) for arm in arms]
    totals = _totals(method, len(kept), positions, scores, weights, flags, rrf_k, len(set(scorers)) == 1)
    arm_z = [(fusion_z_signal(arm.signal), _zscores(own, where, len(kept), flag).tolist())
             for arm, where, own, flag in zip(arms, positions, scores, flags)]
    values = totals.tolist()
    hits = []
    for i in _order(totals, best_rank):
        signals[i][method] = values[i]
        for name, z in arm_z:
            signals[i][name] = z[i]
        arm, index = kept[i]
        hit = arms[arm].hits[index]
        hits.append(Hit(hit.passage, values[i], arms[arm].label, hit.terms, signals[i]))
    return Ranking(label, _scorer(method, scorers), tuple(hits))


def with_candidates(ranking: Ranking, arm: Arm, rescored: Mapping[str, Mapping[str, float]]) -> Ranking:
    """``ranking`` with the hits of a candidates-only ``arm`` it lacks appended, in the arm's order: each carries
    what re-scoring reads of it (``rescored``) and, for every arm z-score the ranking's candidates carry, the value
    fusion gives a candidate that arm did not return (its lowest: the arm's worst score, or 0 when complete), and
    the ranking's lowest score. Nothing already in the ranking changes; the learned stage re-scores them all."""
    have = {hit.passage.id for hit in ranking.hits}
    new = [s for s in arm.hits if s.passage.id not in have]
    if not new:
        return ranking
    floor: dict[str, float] = {}
    for hit in ranking.hits:
        for name in FUSION_Z_SIGNALS:
            if name in hit.signals:
                floor[name] = min(floor.get(name, np.inf), hit.signals[name])
    lowest = min((hit.score for hit in ranking.hits), default=0.0)
    added = tuple(Hit(s.passage, lowest, arm.label, s.terms, {**rescored[s.passage.id], **floor}) for s in new)
    return Ranking(ranking.label, ranking.scorer, ranking.hits + added)


def fuse(rankings: Sequence[Ranking], method: str, label: str, rrf_k: int = 60,
         weights: Sequence[float] | None = None, complete: Sequence[bool] | None = None) -> Ranking:
    """Paths merged: each passage keeps the hit of the path that gave it its best score under ``max`` (the first,
    on a tie; its keyword terms, else those of the hit it replaced), else its first hit, or the first that carries
    keyword terms. ``complete[i]``: ranking i returned every passage its scorer scores above zero."""
    nonempty = [i for i, r in enumerate(rankings) if r.hits]
    weights, flags = _kept(weights, complete, nonempty)
    rankings = [rankings[i] for i in nonempty]
    if not rankings:
        return Ranking(label, method)
    if len(rankings) == 1 and method == "max":
        return replace(rankings[0], label=label)
    kept, positions, best_rank = _numbered([ranking.hits for ranking in rankings])
    best = [rankings[ranking].hits[index] for ranking, index in kept]  # max: becomes the winner's
    scorers = [r.scorer for r in rankings]
    same_scale = len(set(scorers)) == 1
    scores = [np.array([h.score for h in r.hits], dtype=np.float64) for r in rankings]
    totals = _totals(method, len(best), positions, scores, weights, flags, rrf_k, same_scale)
    if method == "max":  # a passage's hit is the path that gave it its score
        running = [-np.inf] * len(best)
        for ranking, where, weighted in zip(rankings, positions, _weighted(scores, weights, same_scale)):
            for i, value, won in zip(where.tolist(), weighted.tolist(), ranking.hits):
                if value > running[i]:
                    running[i] = value
                    terms = won.terms if won.terms is not None else best[i].terms
                    best[i] = Hit(won.passage, won.score, won.path, terms, won.signals)
    values = totals.tolist()
    # built directly, not with dataclasses.replace: this runs for every candidate of every search
    return Ranking(label, _scorer(method, scorers), tuple([
        Hit(best[i].passage, values[i], best[i].path, best[i].terms, best[i].signals)
        for i in _order(totals, best_rank)]))
