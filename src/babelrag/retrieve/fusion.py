"""Fusing rankings: hybrid arms, and later the paths of multi-path strategies (docs/methods.md#merge).

- ``max``: each passage keeps its best score. Only meaningful on one scale; rankings from
  different scorers are min-max normalised first (and the result says so in its scorer name).
- ``rrf``: Σ 1/(k + rank), ranks from 1, scores ignored (Cormack et al. 2009).
- ``zscore``: per-ranking z-scores summed (CombSUM over standardised scores), each ranking
  standardised over every candidate of the fusion. A passage a ranking did not return counts as
  0 when that ranking is ``complete`` (BM25 returns every passage sharing a query term, so the
  others truly score 0), else as the ranking's lowest score ("no better than its worst"). So one
  keyword hit stands out from the rest (its z is large) instead of getting z = 0, and two hits
  keep the gap between their BM25 scores.
Ties break by best rank, then by ranking order. With ``arms`` (one path's dense and keyword arms)
each passage keeps every arm's signals; across paths it keeps those of its best hit.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from babelrag.types import Hit, Ranking


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


def fuse(rankings: Sequence[Ranking], method: str, label: str, rrf_k: int = 60,
         weights: Sequence[float] | None = None, arms: bool = False,
         complete: Sequence[bool] | None = None) -> Ranking:
    """``complete[i]``: ranking i returned every passage its scorer scores above zero (fewer than asked).
    Candidates are numbered once in order of first appearance, and scored as arrays over those numbers."""
    chosen = [i for i, r in enumerate(rankings) if r.hits]  # empty rankings drop out with their weights
    weights = [list(weights)[i] if weights is not None else 1.0 for i in chosen]
    flags = [bool(complete[i]) if complete is not None else False for i in chosen]
    rankings = [rankings[i] for i in chosen]
    if not rankings:
        return Ranking(label, method)
    if len(rankings) == 1 and method == "max":
        return replace(rankings[0], label=label)
    number: dict[str, int] = {}
    best: list[Hit] = []  # per candidate: its first hit, or the first that carries keyword terms
    best_rank: list[tuple[int, int]] = []  # per candidate: (best rank, the ranking that gave it)
    signals: list[Mapping[str, float]] = []  # per candidate (arms): every arm's signals, copied only to merge
    positions = []
    for order, ranking in enumerate(rankings):
        mine = []
        for rank, hit in enumerate(ranking.hits, start=1):
            i = number.setdefault(hit.passage.id, len(best))
            mine.append(i)
            if i == len(best):
                best.append(hit)
                best_rank.append((rank, order))
                if arms:
                    signals.append(hit.signals)
                continue
            if best[i].terms is None and hit.terms is not None:
                best[i] = hit
            best_rank[i] = min(best_rank[i], (rank, order))
            if arms:
                signals[i] = {**signals[i], **hit.signals}
        positions.append(np.array(mine, dtype=np.intp))
    scores = [np.array([h.score for h in r.hits], dtype=np.float64) for r in rankings]

    size = len(best)
    same_scale = len({r.scorer for r in rankings}) == 1
    scorer = method
    if method == "rrf":
        totals = np.zeros(size)
        for w, where in zip(weights, positions):
            np.add.at(totals, where, w / (rrf_k + np.arange(1, len(where) + 1)))
    elif method == "max":
        totals = np.full(size, -np.inf)
        for w, ranking, where, own in zip(weights, rankings, positions, scores):
            weighted = w * (own if same_scale else _minmax(own))
            for i, value, won in zip(where.tolist(), weighted.tolist(), ranking.hits):
                if value > totals[i]:
                    totals[i] = value
                    if not arms:  # across paths, a passage's hit is the path that gave it its score
                        terms = won.terms if won.terms is not None else best[i].terms
                        best[i] = Hit(won.passage, won.score, won.path, terms, won.signals)
        scorer = rankings[0].scorer if same_scale else "max-minmax"
    elif method == "zscore":
        totals = np.zeros(size)
        for w, where, own, flag in zip(weights, positions, scores, flags):
            totals += w * _zscores(own, where, size, flag)
    else:
        raise ValueError(f"unknown fusion method '{method}'")

    ranks = np.array(best_rank, dtype=np.intp)
    ordered = np.lexsort((ranks[:, 1], ranks[:, 0], -totals)).tolist()
    values = totals.tolist()
    # built directly, not with dataclasses.replace: this runs for every candidate of every search
    return Ranking(label, scorer, tuple(
        Hit(best[i].passage, values[i], best[i].path, best[i].terms,
            {**signals[i], method: values[i]} if arms else best[i].signals)
        for i in ordered))
