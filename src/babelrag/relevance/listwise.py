"""The relevance model's weights, fitted to rank: a conditional logit over each path's candidates.

A search only ever orders one path's candidates, so the weights are fitted to that job: per path, the
probability that a gold candidate comes first under a softmax of the scores, ``Σ_gold e^s / Σ_all e^s``.
Every language version of the gold page counts as gold (any of them first is a hit), so a parallel KB needs
no arbitrary choice of one version. A pointwise logistic regression also spends its weights on telling
paths apart — how many relevant candidates a layout has, which the calibration (``model.recalibrate``)
models anyway — and, measured on the shipped data's test articles, ranks cross-lingual gold pages worse:
MRR@10 scattered 0.778 → 0.799 and mixed 0.750 → 0.775 (gold in another language 0.753 → 0.781 and
0.721 → 0.755), for 0.005–0.008 less on the parallel and unique-country layouts
(``benchmarks/default_relevance.py``). Features constant over a path (its language mix, its size) cancel
out of the softmax: they only enter through the calibration.
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from babelrag.errors import ConfigError


def listwise_weights(standardised: np.ndarray, labels: np.ndarray, paths: np.ndarray, c: float) -> np.ndarray:
    """The weights maximising Σ over paths of log P(a gold candidate first), minus ``|w|² / 2c`` (``c`` as
    scikit-learn's ``C``: larger is weaker regularisation). ``paths``: each row's path (any integer id).
    Paths without a gold candidate carry no information about the order and are left out."""
    gold = labels > 0
    has_gold = np.zeros(int(paths.max()) + 1 if len(paths) else 0, dtype=bool)
    np.logical_or.at(has_gold, paths, gold)
    has_other = np.zeros_like(has_gold)
    np.logical_or.at(has_other, paths, ~gold)
    kept = (has_gold & has_other)[paths]
    if not kept.any():
        raise ConfigError("relevance model: the training paths need a relevant and an irrelevant candidate")
    order = np.flatnonzero(kept)[np.argsort(paths[kept], kind="stable")]
    rows, is_gold, path = standardised[order], gold[order].astype(float), paths[order]
    starts = np.flatnonzero(np.r_[True, path[1:] != path[:-1]])
    member = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(path)]))

    def loss(weights: np.ndarray) -> tuple[float, np.ndarray]:
        scores = rows @ weights
        shifted = np.exp(scores - np.maximum.reduceat(scores, starts)[member])
        total = np.add.reduceat(shifted, starts)
        found = np.add.reduceat(shifted * is_gold, starts)
        # d/dw log(found/total) = E[x | gold, softmax] − E[x | softmax]
        pull = shifted * is_gold / found[member] - shifted / total[member]
        value = -float(np.sum(np.log(found) - np.log(total))) + 0.5 * float(weights @ weights) / c
        return value / len(starts), (weights / c - rows.T @ pull) / len(starts)  # per path: better conditioned

    fitted = minimize(loss, np.zeros(rows.shape[1]), jac=True, method="L-BFGS-B", options={"maxiter": 3000})
    return np.asarray(fitted.x, dtype=np.float64)
