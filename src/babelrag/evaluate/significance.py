"""Paired comparison of two configurations on the same questions: a randomisation (sign-flip) test.

Under the null hypothesis the two configurations are exchangeable per question, so flipping the
sign of each question's differences at random gives the null distribution of the mean difference.
A question asked in eight languages is one question: its rows flip together (``clusters.py``), so
copies neither narrow the null nor shrink p. Exact enough at 10,000 resamples; p is two-sided with
the +1 correction.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from babelrag.evaluate.clusters import cluster_key, sign_flip_test

RESAMPLES = 10_000
MIN_PAIRS = 10  # fewer paired questions cannot reach p < 0.05 after correction: such cells are not tested
CORRECTION = "Benjamini–Hochberg"


def paired_test(a: Sequence[float], b: Sequence[float], seed: int = 0, resamples: int = RESAMPLES,
                clusters: Sequence[str] | None = None) -> dict[str, float]:
    """b − a per row; ``clusters``: each row's question (default: every row its own)."""
    diff = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    return sign_flip_test(diff, clusters, seed, resamples)


def compare(rows_a: Sequence[Mapping[str, Any]], rows_b: Sequence[Mapping[str, Any]], metric: str,
            seed: int = 0) -> dict[str, Any]:
    """Per cell and overall, on the questions both runs scored on ``metric`` (matched by id): the two
    means on those same questions, their difference and its p, rows of one question flipped together
    (cells with fewer than ``MIN_PAIRS`` questions untested)."""
    b_by_id = {r["id"]: r for r in rows_b}
    pairs = [(r, b_by_id[r["id"]]) for r in rows_a
             if r["id"] in b_by_id and r.get(metric) is not None and b_by_id[r["id"]].get(metric) is not None]
    cells: dict[tuple[str, str], list] = defaultdict(list)
    for pair in pairs:
        cells[(pair[0]["kb"], pair[0]["lang"])].append(pair)

    def test(group: list) -> dict[str, Any]:
        a, b = [x[metric] for x, _ in group], [y[metric] for _, y in group]
        clusters = [cluster_key(x) for x, _ in group]
        means = {"mean_a": float(np.mean(a)) if a else float("nan"), "mean_b": float(np.mean(b)) if b else float("nan")}
        if len(set(clusters)) < MIN_PAIRS:
            return {"n": len(group), "clusters": len(set(clusters)), "delta": means["mean_b"] - means["mean_a"],
                    "p": None, **means}
        return {**paired_test(a, b, seed, clusters=clusters), **means}

    return {"metric": metric, "overall": test(pairs),
            "cells": [{"kb": kb, "lang": lang, **test(group)} for (kb, lang), group in sorted(cells.items())]}


def adjust(tests: Sequence[dict[str, Any]]) -> None:
    """Adds ``p_adj`` (Benjamini–Hochberg, scipy) to every test in one family; untested ones get None."""
    from scipy.stats import false_discovery_control

    tested = [t for t in tests if t.get("p") is not None and not np.isnan(t["p"])]
    for t in tests:
        t["p_adj"] = None
    if tested:
        for t, p in zip(tested, false_discovery_control([t["p"] for t in tested], method="bh")):
            t["p_adj"] = float(p)


def correct(comparisons: Sequence[dict[str, Any]], metrics: Sequence[str]) -> dict[str, Any]:
    """Corrects a report's tests for multiple comparisons: all per-cell tests (every comparison and
    metric) form one family, the overall tests another. Returns how, for the report to say."""
    cells = [c for comparison in comparisons for m in metrics if m in comparison for c in comparison[m]["cells"]]
    overall = [comparison[m]["overall"] for comparison in comparisons for m in metrics if m in comparison]
    adjust(cells)
    adjust(overall)
    return {"method": CORRECTION, "cell_tests": sum(c.get("p") is not None for c in cells),
            "overall_tests": sum(o.get("p") is not None for o in overall), "min_pairs": MIN_PAIRS}
