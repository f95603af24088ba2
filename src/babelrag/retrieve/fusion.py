"""Fusing rankings: hybrid arms, and later the paths of multi-path strategies (SPEC §3.6).

- ``max``: each passage keeps its best score. Only meaningful on one scale; rankings from
  different scorers are min-max normalised first (and the result says so in its scorer name).
- ``rrf``: Σ 1/(k + rank), ranks from 1, scores ignored (Cormack et al. 2009).
- ``zscore``: per-ranking z-scores summed (CombSUM over standardised scores); a passage a
  ranking did not return gets that ranking's lowest z, i.e. "no better than its worst".
Ties break by best rank, then by ranking order.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from babelrag.types import Hit, Ranking


def _normalised(ranking: Ranking, how: str) -> dict[str, float]:
    scores = np.array([h.score for h in ranking.hits], dtype=np.float64)
    if how == "minmax":
        span = scores.max() - scores.min()
        values = (scores - scores.min()) / span if span > 0 else np.ones_like(scores)
    else:
        std = scores.std()
        values = (scores - scores.mean()) / std if std > 0 else np.zeros_like(scores)
    return {h.passage.id: float(v) for h, v in zip(ranking.hits, values)}


def fuse(rankings: Sequence[Ranking], method: str, label: str, rrf_k: int = 60,
         weights: Sequence[float] | None = None) -> Ranking:
    rankings = [r for r in rankings if r.hits]
    if not rankings:
        return Ranking(label, method)
    if len(rankings) == 1 and method == "max":
        return replace(rankings[0], label=label)
    weights = list(weights) if weights is not None else [1.0] * len(rankings)
    best: dict[str, Hit] = {}
    best_rank: dict[str, tuple[int, int]] = {}
    for order, ranking in enumerate(rankings):
        for rank, hit in enumerate(ranking.hits, start=1):
            pid = hit.passage.id
            if pid not in best or (best[pid].vector is None and hit.vector is not None):
                best[pid] = hit
            best_rank[pid] = min(best_rank.get(pid, (rank, order)), (rank, order))

    totals: dict[str, float] = {}
    same_scale = len({r.scorer for r in rankings}) == 1
    scorer = method
    if method == "rrf":
        for w, ranking in zip(weights, rankings):
            for rank, hit in enumerate(ranking.hits, start=1):
                totals[hit.passage.id] = totals.get(hit.passage.id, 0.0) + w / (rrf_k + rank)
    elif method == "max":
        per = [({h.passage.id: h.score for h in r.hits} if same_scale else _normalised(r, "minmax"))
               for r in rankings]
        for w, scores in zip(weights, per):
            for pid, score in scores.items():
                totals[pid] = max(totals.get(pid, -np.inf), w * score)
        scorer = rankings[0].scorer if same_scale else "max-minmax"
    elif method == "zscore":
        for w, ranking in zip(weights, rankings):
            z = _normalised(ranking, "z")
            floor = min(z.values())
            for pid in best:
                totals[pid] = totals.get(pid, 0.0) + w * z.get(pid, floor)
    else:
        raise ValueError(f"unknown fusion method '{method}'")

    ordered = sorted(totals, key=lambda pid: (-totals[pid], best_rank[pid]))
    return Ranking(label, scorer, tuple(replace(best[pid], score=totals[pid]) for pid in ordered))
