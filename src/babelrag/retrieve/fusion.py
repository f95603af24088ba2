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

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from babelrag.types import Hit, Ranking


def _minmax(ranking: Ranking) -> dict[str, float]:
    scores = np.array([h.score for h in ranking.hits], dtype=np.float64)
    span = scores.max() - scores.min()
    values = (scores - scores.min()) / span if span > 0 else np.ones_like(scores)
    return {h.passage.id: float(v) for h, v in zip(ranking.hits, values)}


def _zscores(ranking: Ranking, candidates: Sequence[str], complete: bool) -> np.ndarray:
    """z over all ``candidates``, in their order; the ones this ranking did not return get 0 (complete) or
    its lowest score."""
    own = {h.passage.id: h.score for h in ranking.hits}
    missing = 0.0 if complete else min(own.values())
    values = np.array([own.get(pid, missing) for pid in candidates], dtype=np.float64)
    std = values.std()
    return (values - values.mean()) / std if std > 0 else np.zeros_like(values)


def fuse(rankings: Sequence[Ranking], method: str, label: str, rrf_k: int = 60,
         weights: Sequence[float] | None = None, arms: bool = False,
         complete: Sequence[bool] | None = None) -> Ranking:
    """``complete[i]``: ranking i returned every passage its scorer scores above zero (fewer than asked)."""
    chosen = [i for i, r in enumerate(rankings) if r.hits]  # empty rankings drop out with their weights
    weights = [list(weights)[i] if weights is not None else 1.0 for i in chosen]
    flags = [bool(complete[i]) if complete is not None else False for i in chosen]
    rankings = [rankings[i] for i in chosen]
    if not rankings:
        return Ranking(label, method)
    if len(rankings) == 1 and method == "max":
        return replace(rankings[0], label=label)
    best: dict[str, Hit] = {}
    best_rank: dict[str, tuple[int, int]] = {}
    signals: dict[str, dict[str, float]] = {}
    for order, ranking in enumerate(rankings):
        for rank, hit in enumerate(ranking.hits, start=1):
            pid = hit.passage.id
            if pid not in best or (best[pid].terms is None and hit.terms is not None):
                best[pid] = hit
            best_rank[pid] = min(best_rank.get(pid, (rank, order)), (rank, order))
            if arms:
                signals.setdefault(pid, {}).update(hit.signals)

    totals: dict[str, float] = {}
    same_scale = len({r.scorer for r in rankings}) == 1
    scorer = method
    if method == "rrf":
        for w, ranking in zip(weights, rankings):
            for rank, hit in enumerate(ranking.hits, start=1):
                totals[hit.passage.id] = totals.get(hit.passage.id, 0.0) + w / (rrf_k + rank)
    elif method == "max":
        per = [({h.passage.id: h.score for h in r.hits} if same_scale else _minmax(r)) for r in rankings]
        for w, scores, ranking in zip(weights, per, rankings):
            hits = {h.passage.id: h for h in ranking.hits}
            for pid, score in scores.items():
                if w * score > totals.get(pid, -np.inf):
                    totals[pid] = w * score
                    if not arms:  # across paths, a passage's hit is the path that gave it its score
                        won = hits[pid]
                        terms = won.terms if won.terms is not None else best[pid].terms
                        best[pid] = Hit(won.passage, won.score, won.path, terms, won.signals)
        scorer = rankings[0].scorer if same_scale else "max-minmax"
    elif method == "zscore":
        candidates = list(best)
        summed = np.zeros(len(candidates))
        for w, ranking, flag in zip(weights, rankings, flags):
            summed += w * _zscores(ranking, candidates, flag)
        totals = dict(zip(candidates, summed.tolist()))
    else:
        raise ValueError(f"unknown fusion method '{method}'")

    ordered = sorted(totals, key=lambda pid: (-totals[pid], best_rank[pid]))
    # built directly, not with dataclasses.replace: this runs for every candidate of every search
    return Ranking(label, scorer, tuple(
        Hit(best[pid].passage, totals[pid], best[pid].path, best[pid].terms,
            {**signals[pid], method: totals[pid]} if arms else best[pid].signals)
        for pid in ordered))
