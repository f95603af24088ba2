"""DeLP — debiased language preference ([DELTA] §3; docs/methods.md#delp).

The raw preference s_e(Lq, Ld) (an MLRS matrix) is regressed on structural priors,
    φ(Lq, Ld) = [1, log p_ret(Ld|Lq), log p_db(Ld), log ℓ(Ld), log p_gold(Lq, Ld), log p_cult(Ld), 1[Lq = Ld]]
(each log(· + ε)), by ridge regression in closed form β = (ΦᵀΦ + λI)⁻¹Φᵀs; the residual re-centred on
the mean of s is the debiased preference. β is always reported (the indicator weight included: as
written, it is subtracted too).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

Pair = tuple[str, str]  # (query language, document language)
FEATURES = ("intercept", "log p_ret", "log p_db", "log length", "log p_gold", "log p_cult", "same language")
PRIORS = ("p_ret", "p_db", "length", "p_gold", "p_cult")


@dataclass(frozen=True)
class Priors:
    p_ret: Mapping[Pair, float]  # exposure: share of Ld among the top-50 for Lq queries
    p_db: Mapping[str, float]  # corpus size: share of the datastore's passages in Ld
    length: Mapping[str, float]  # passage length: median characters in Ld
    p_gold: Mapping[Pair, float]  # gold availability: share of Lq queries with gold in the Ld corpus
    p_cult: Mapping[str, float]  # cultural: share of queries whose locale language is Ld

    def value(self, name: str, pair: Pair) -> float:
        table = getattr(self, name)
        return float(table.get(pair, 0.0) if name in ("p_ret", "p_gold") else table.get(pair[1], 0.0))


def features(pair: Pair, priors: Priors, eps: float = 1e-6) -> np.ndarray:
    return np.array([1.0, *(np.log(priors.value(name, pair) + eps) for name in PRIORS), float(pair[0] == pair[1])])


@dataclass(frozen=True)
class Calibration:
    beta: np.ndarray
    raw: dict[Pair, float]
    debiased: dict[Pair, float]
    mean: float

    def to_dict(self) -> dict[str, Any]:
        return {"beta": dict(zip(FEATURES, map(float, self.beta))), "mean": self.mean,
                "raw": {f"{q}|{d}": v for (q, d), v in self.raw.items()},
                "debiased": {f"{q}|{d}": v for (q, d), v in self.debiased.items()}}


def calibrate(scores: Mapping[Pair, float], priors: Priors, lam: float = 1.0, eps: float = 1e-6,
              penalize_intercept: bool = True) -> Calibration:
    pairs = sorted(scores)
    phi = np.vstack([features(pair, priors, eps) for pair in pairs])
    s = np.array([scores[pair] for pair in pairs], dtype=np.float64)
    penalty = lam * np.eye(phi.shape[1])
    if not penalize_intercept:
        penalty[0, 0] = 0.0
    beta = np.linalg.solve(phi.T @ phi + penalty, phi.T @ s)
    mean = float(s.mean())
    residual = s - phi @ beta
    return Calibration(beta, dict(zip(pairs, map(float, s))), dict(zip(pairs, map(float, residual + mean))), mean)


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    if np.std(x) == 0 or np.std(y) == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


def prior_correlations(calibration: Calibration, priors: Priors, eps: float = 1e-6) -> dict[str, dict[str, float]]:
    """Pearson r between each prior and the scores, before (MLRS) and after (DeLP), raw and log priors."""
    pairs = sorted(calibration.raw)
    before = np.array([calibration.raw[p] for p in pairs])
    after = np.array([calibration.debiased[p] for p in pairs])
    out = {}
    for name in PRIORS:
        values = np.array([priors.value(name, p) for p in pairs])
        out[name] = {"before": pearson(values, before), "after": pearson(values, after),
                     "before_log": pearson(np.log(values + eps), before), "after_log": pearson(np.log(values + eps), after)}
    return out


def variability(raw: Mapping[Pair, Sequence[float]], debiased: Mapping[Pair, Sequence[float]],
                permutations: int = 10_000, seed: int = 0) -> dict[str, Any]:
    """How much each (query, document language) score moves over a series of measurements, MLRS against
    DeLP: mean range and std over the pairs, and paired permutation tests of the difference (docs/methods.md#delp-sensitivity)."""
    keys = sorted(raw)
    raw_range = np.array([np.ptp(raw[k]) for k in keys])
    raw_std = np.array([np.std(raw[k]) for k in keys])
    de_range = np.array([np.ptp(debiased[k]) for k in keys])
    de_std = np.array([np.std(debiased[k]) for k in keys])
    rng = np.random.default_rng(seed)

    def paired_p(a: np.ndarray, b: np.ndarray) -> float:
        diff = a - b
        if not np.any(diff):
            return 1.0
        flips = rng.choice((-1.0, 1.0), size=(permutations, len(diff)))
        return float((np.sum(np.abs((flips * diff).mean(axis=1)) >= abs(diff.mean()) - 1e-12) + 1) / (permutations + 1))

    return {"pairs": len(keys), "mlrs": {"range": float(raw_range.mean()), "std": float(raw_std.mean())},
            "delp": {"range": float(de_range.mean()), "std": float(de_std.mean())},
            "p_range": paired_p(raw_range, de_range), "p_std": paired_p(raw_std, de_std)}
