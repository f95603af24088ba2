"""The relevance model's weights, fitted to rank: a conditional logit over each path's candidates.

A search only ever orders one path's candidates, so the weights are fitted to that job: per path, the
probability that a gold candidate comes first under a softmax of the scores, ``Σ_gold e^s / Σ_all e^s``.
Every language version of the gold page counts as gold (any of them first is a hit), so a parallel KB needs
no arbitrary choice of one version. A pointwise logistic regression also spends its weights on telling
paths apart — how many relevant candidates a layout has, which the calibration (``learn.recalibrate``)
models anyway — and, measured on the shipped data's test articles, ranks cross-lingual gold pages worse:
MRR@10 scattered 0.778 → 0.800 and mixed 0.750 → 0.776 (gold in another language 0.753 → 0.783 and
0.721 → 0.757), for 0.005–0.009 less on the parallel and unique-country layouts
(``benchmarks/default_relevance.py``). Features constant over a path (its language mix, its size) cancel
out of the softmax: they only enter through the calibration.
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from babelrag.errors import ConfigError

MAX_ITERATIONS = 3000  # the problem is strongly convex (L2): reaching this means something is wrong

def listwise_weights(standardised: np.ndarray, labels: np.ndarray, paths: np.ndarray, c: float,
                     anchor: np.ndarray | None = None) -> np.ndarray:
    """The weights maximising Σ over paths of log P(a gold candidate first), minus ``|w − anchor|² / 2c`` (``c`` as
    scikit-learn's ``C``: larger is weaker regularisation; ``anchor``: the weights to shrink toward, zero unless
    given — another model's, so that a few paths move it only as far as they can vouch for). ``paths``: each row's
    path (any ids). Paths without both a gold and another candidate carry no information about the order and are
    left out."""
    _, path_of = np.unique(paths, return_inverse=True)
    gold = labels > 0
    has_gold = np.bincount(path_of, weights=gold) > 0
    has_other = np.bincount(path_of, weights=~gold) > 0
    kept = (has_gold & has_other)[path_of] if len(path_of) else np.zeros(0, dtype=bool)
    if not kept.any():
        raise ConfigError("relevance model: the training paths need a relevant and an irrelevant candidate")
    order = np.flatnonzero(kept)[np.argsort(path_of[kept], kind="stable")]
    rows, is_gold, path = standardised[order], gold[order], path_of[order]
    starts = np.flatnonzero(np.r_[True, path[1:] != path[:-1]])
    member = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(path)]))

    def log_sum_exp(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per path, log Σ e^score over the rows whose score is finite, and each row's softmax weight."""
        top = np.maximum.reduceat(scores, starts)
        shifted = np.exp(scores - top[member])
        total = np.add.reduceat(shifted, starts)
        return top + np.log(total), shifted / total[member]

    prior = np.zeros(rows.shape[1]) if anchor is None else np.asarray(anchor, dtype=np.float64)
    if prior.shape != (rows.shape[1],) or not np.all(np.isfinite(prior)):
        raise ConfigError("relevance model: the weights to shrink toward need one finite value per feature")

    def loss(weights: np.ndarray) -> tuple[float, np.ndarray]:
        scores = rows @ weights
        every, share = log_sum_exp(scores)
        # the gold candidates' own log-sum-exp, shifted by their own best: never log(0) however far below they sit
        found, gold_share = log_sum_exp(np.where(is_gold, scores, -np.inf))
        pull = gold_share - share  # d/dw log P(gold first) = E[x | gold, softmax] − E[x | softmax]
        shrunk = weights - prior
        value = -float(np.sum(found - every)) + 0.5 * float(shrunk @ shrunk) / c
        return value / len(starts), (shrunk / c - rows.T @ pull) / len(starts)  # per path: better conditioned

    fitted = minimize(loss, prior.copy(), jac=True, method="L-BFGS-B", options={"maxiter": MAX_ITERATIONS})
    if fitted.status == 1:  # stopped by the budget, not at an optimum: weights that would be used as if fitted
        raise ConfigError(f"relevance model: the ranking fit did not converge in {MAX_ITERATIONS} iterations")
    if not np.all(np.isfinite(fitted.x)) or not np.isfinite(fitted.fun):
        raise ConfigError("relevance model: the ranking fit did not converge to finite weights")
    return np.asarray(fitted.x, dtype=np.float64)
