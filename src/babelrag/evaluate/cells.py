"""Aggregation by cell (knowledge base × question language) and overall, with bootstrap CIs.

An overall mean hides the cells that fail; every metric is reported per cell with its n, a
percentile-bootstrap 95% interval, and a flag when the cell is too small to move on (n < 30).
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

SMALL_CELL = 30
BOOTSTRAP = 1000
# Averaged per question; latency gets percentiles instead, LLM costs are per-question means.
MEAN_METRICS = ("recall@1", "recall@3", "recall@5", "recall@10", "recall@20", "hit@1", "hit@3", "hit@5",
                "hit@10", "hit@20", "mrr", "ndcg@10", "docs_passed", "llm_calls", "llm_tokens", "llm_seconds",
                "llm_cached", "failed", "failures")
ANSWER_METRICS = ("answer_char3", "answer_em", "answer_lang_ok", "answer_lang_unclassified", "answer_no_reference")
# per question: retrieval_ms leaves out model calls, model_ms is their original cost, latency_ms the sum
TIMINGS = ("latency_ms", "retrieval_ms", "model_ms")
CI_METRICS = ("recall@10", "mrr", "docs_passed", "answer_char3")


def bootstrap_ci(values: Sequence[float], seed: int = 0, resamples: int = BOOTSTRAP) -> tuple[float, float]:
    data = np.asarray(values, dtype=np.float64)
    if len(data) == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(resamples, len(data)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def summarise(rows: Sequence[Mapping[str, Any]], seed: int = 0) -> dict[str, Any]:
    """Means of every per-question metric present, latency percentiles, CIs for the headline metrics."""
    out: dict[str, Any] = {"n": len(rows)}
    for metric in MEAN_METRICS + ANSWER_METRICS:
        values = [r[metric] for r in rows if r.get(metric) is not None]
        if values:
            out[metric] = float(np.mean(values))
    for timing in TIMINGS:
        values = [r[timing] for r in rows if timing in r]
        if values:
            out[f"{timing}_p50"] = float(np.percentile(values, 50))
            out[f"{timing}_p95"] = float(np.percentile(values, 95))
    stages = Counter(stage for r in rows for stage in r.get("failure_stages") or ())
    if stages:
        out["failure_stages"] = dict(stages.most_common())
    for metric in CI_METRICS:
        values = [r[metric] for r in rows if r.get(metric) is not None]
        if values:
            out[f"{metric}_ci"] = list(bootstrap_ci(values, seed))
    return out


def by_cell(rows: Iterable[Mapping[str, Any]], seed: int = 0) -> dict[str, Any]:
    """``{"overall": {...}, "cells": [{"kb", "lang", "n", metrics..., "small"}]}`` in a stable order."""
    rows = list(rows)
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[(row["kb"], row["lang"])].append(row)
    cells = []
    for (kb, lang), members in sorted(groups.items()):
        cell = {"kb": kb, "lang": lang, **summarise(members, seed)}
        cell["small"] = cell["n"] < SMALL_CELL
        cells.append(cell)
    return {"overall": summarise(rows, seed), "cells": cells}
