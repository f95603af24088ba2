"""Paired comparison of two configurations on the same questions: a randomisation (sign-flip) test.

Under the null hypothesis the two configurations are exchangeable per question, so flipping the
sign of each per-question difference at random gives the null distribution of the mean
difference. Exact enough at 10,000 resamples; p is two-sided with the +1 correction.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

RESAMPLES = 10_000


def paired_test(a: Sequence[float], b: Sequence[float], seed: int = 0,
                resamples: int = RESAMPLES) -> dict[str, float]:
    diff = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    if len(diff) == 0:
        return {"n": 0, "delta": float("nan"), "p": float("nan")}
    observed = abs(diff.mean())
    if not np.any(diff):
        return {"n": len(diff), "delta": 0.0, "p": 1.0}
    rng = np.random.default_rng(seed)
    extreme = 0
    block = max(1, 2_000_000 // len(diff))  # bounded memory: blocks of resamples
    for start in range(0, resamples, block):
        signs = rng.choice((-1.0, 1.0), size=(min(block, resamples - start), len(diff)))
        extreme += int(np.sum(np.abs((signs * diff).mean(axis=1)) >= observed - 1e-12))
    return {"n": len(diff), "delta": float(diff.mean()), "p": (extreme + 1) / (resamples + 1)}


def compare(rows_a: Sequence[Mapping[str, Any]], rows_b: Sequence[Mapping[str, Any]], metric: str,
            seed: int = 0) -> dict[str, Any]:
    """Per cell and overall, on the questions both runs scored on ``metric`` (matched by id)."""
    b_by_id = {r["id"]: r for r in rows_b}
    pairs = [(r, b_by_id[r["id"]]) for r in rows_a
             if r["id"] in b_by_id and r.get(metric) is not None and b_by_id[r["id"]].get(metric) is not None]
    cells: dict[tuple[str, str], list] = defaultdict(list)
    for pair in pairs:
        cells[(pair[0]["kb"], pair[0]["lang"])].append(pair)

    def test(group: list) -> dict[str, float]:
        return paired_test([a[metric] for a, _ in group], [b[metric] for _, b in group], seed)

    return {"metric": metric, "overall": test(pairs),
            "cells": [{"kb": kb, "lang": lang, **test(group)} for (kb, lang), group in sorted(cells.items())]}
