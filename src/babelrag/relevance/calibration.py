"""The numerics of turning the relevance model's ranking scores into probabilities, never reordering a path.

The weights are fitted to rank (``listwise.py``), so a score means something only against the other
candidates of its path. The model's own answer to "is this the path's relevant candidate?" is then its
softmax share of the path, ``path_softmax``: the top hit of a six-passage KB gets most of the mass, the top
hit of a 60-candidate pool among close rivals much less. Platt scaling on the logit alone cannot say that
(one slope for every pool): measured on the shipped data's test articles, the as-written top hit was
predicted 0.35 where 0.70 was observed on the scattered layout, 0.15 against 0.83 on unique-country.

The calibration is a logistic fit on the logit, the softmax share and inputs constant over a path. Its
weight on the logit is kept positive and its weight on the share non-negative, so within a path the
probability is strictly increasing in the score, and the order is the weights' order.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

PATH_SOFTMAX = "path_softmax"  # a calibration input the model computes itself: not a feature of the candidate
MIN_SLOPE = 1e-3  # per standard deviation of the logit: at 0, scores whose share rounds away would tie
MAX_ITERATIONS = 2000  # a handful of weights: measured well under 100 on the shipped data


def path_softmax(logits: np.ndarray, paths: np.ndarray) -> np.ndarray:
    """Each candidate's share of its path under a softmax of the logits (``paths``: each row's path, any ids)."""
    if len(logits) == 0:
        return np.zeros(0)
    if not np.isfinite(logits).all():  # one would turn its whole path into NaN: a bug upstream, never data
        raise ValueError("relevance model: a non-finite logit")
    if (paths == paths[0]).all():  # one path (the reranker's every call): its softmax as it is
        shifted = np.exp(logits - logits.max())
        return shifted / shifted.sum()
    _, path_of = np.unique(paths, return_inverse=True)
    best = np.full(int(path_of.max()) + 1, -np.inf)
    np.maximum.at(best, path_of, logits)
    shifted = np.exp(logits - best[path_of])
    return shifted / np.bincount(path_of, weights=shifted)[path_of]


class CalibrationError(ValueError):
    """The calibration has nothing to fit (one label only) or did not converge: a fold may be skipped for it, where
    any other error is a bug and stops the run."""


def monotone_logistic(inputs: np.ndarray, labels: np.ndarray, increasing: Sequence[int], c: float = 1e4) -> np.ndarray:
    """(weights per input column, offset) of a logistic regression of ``labels`` on ``inputs`` whose weights
    on the ``increasing`` columns are kept ≥ 0 (the first of them ≥ ``MIN_SLOPE`` per standard deviation, so the
    probability rises strictly with it). L2 on the weights of the standardised columns, ``|w|² / 2c``: every
    input penalised alike, and at the default ``c`` negligible (as scikit-learn's ``C`` would be, on raw inputs)."""
    if len(inputs) == 0 or labels.min() == labels.max():
        raise CalibrationError("calibration: needs relevant and irrelevant candidates")
    scale = inputs.std(axis=0)
    scale[scale == 0] = 1.0
    centre = inputs.mean(axis=0)
    standardised = (inputs - centre) / scale
    positive = labels > 0
    width = inputs.shape[1]

    def loss(params: np.ndarray) -> tuple[float, np.ndarray]:
        weights, offset = params[:width], params[width]
        z = standardised @ weights + offset
        total = np.logaddexp(0.0, np.where(positive, -z, z)).sum() + weights @ weights / (2 * c)
        residual = expit(z) - positive
        return float(total), np.append(standardised.T @ residual + weights / c, residual.sum())

    bounds = [((MIN_SLOPE if column == increasing[0] else 0.0), None) if column in increasing else (None, None)
              for column in range(width + 1)]
    found = minimize(loss, np.zeros(width + 1), jac=True, method="L-BFGS-B", bounds=bounds,
                     options={"maxiter": MAX_ITERATIONS})
    if found.status == 1:  # stopped by the budget, not at an optimum: weights that would be used as if fitted
        raise CalibrationError(f"calibration: the fit did not converge in {MAX_ITERATIONS} iterations")
    weights = found.x[:width] / scale
    return np.append(weights, found.x[width] - centre @ weights)
