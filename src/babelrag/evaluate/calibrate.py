"""Threshold calibration (SPEC §2.2): the largest τ whose Recall@k loss stays within a budget.

It reads a reranked run's evidence (scores in descending order, so the passages above any τ
are a prefix of the top k): no search is repeated. τ belongs to the reranker that produced it.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from babelrag.errors import ConfigError
from babelrag.evaluate.metrics import recall_at


def _recall(rows: Sequence[Mapping[str, Any]], tau: float, k: int) -> tuple[float, float]:
    recalls, passed = [], []
    for row in rows:
        kept = [h["doc_id"] for h in row["evidence"] if h["score"] >= tau][:k]
        recalls.append(recall_at(kept, row["gold_pages"], k))
        passed.append(len(kept))
    return float(np.mean(recalls)), float(np.mean(passed))


def calibrate_threshold(rows: Sequence[Mapping[str, Any]], budget: float = 0.005, k: int = 10,
                        split: str | None = "dev", allow_all: bool = False) -> dict[str, Any]:
    """τ from the ``split`` questions only; scoring it on those same questions would flatter it, so
    without a dev split calibration is refused unless ``allow_all`` (then every question is used,
    and the result says so)."""
    in_split = [r for r in rows if split is not None and (r.get("tags") or {}).get("split") == split]
    if in_split:
        chosen, used_split = in_split, split
    elif allow_all:
        chosen, used_split = list(rows), None
    else:
        raise ConfigError(f"threshold calibration: no questions tagged split={split} (tags.split in the golden "
                          f"set); τ tuned on the questions it is scored on would be leakage. Tag a dev split, "
                          f"or allow calibrating on all questions explicitly")
    if not chosen:
        raise ConfigError("threshold calibration: no questions to calibrate on")
    base, base_passed = _recall(chosen, float("-inf"), k)
    best = None
    for tau in sorted({h["score"] for r in chosen for h in r["evidence"]}):
        recall, passed = _recall(chosen, tau, k)
        if base - recall > budget:
            break
        best = (tau, recall, passed)
    tau, recall, passed = best if best else (float("-inf"), base, base_passed)
    return {"threshold": tau, "budget": budget, "n": len(chosen), "split": used_split,
            "recall_before": base, "recall_after": recall, "docs_passed_before": base_passed,
            "docs_passed_after": passed}
