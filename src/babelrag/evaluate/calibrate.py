"""Threshold calibration (docs/methods.md#threshold): the largest τ whose Recall@k loss stays within a budget.

It reads a reranked run's evidence (scores in descending order, so the passages above any τ
are a prefix of the top k): no search is repeated. τ belongs to the reranker that produced it.

The budget holds for new questions, not only for the calibration ones: τ must satisfy
(n·loss + 1)/(n + 1) ≤ budget (conformal risk control, Angelopoulos et al. 2022: a question's loss
lies in [0, 1] and grows with τ, so the expected loss on a new question from the same mix stays within
the budget). Measured why: with 127 dev questions of a cell, the largest τ losing none of them
cost 2–3 points of Recall@10 on that cell's test questions. So a budget of 0.005 needs 199
questions before it allows any cut; fewer questions vouch for none.

The n of the bound counts *questions*, not rows: a question asked in eight languages is one draw
from the mix of questions (``clusters.py``), so its rows' losses are averaged into one loss and
counted once. Counting rows would let eight copies of 25 questions vouch for a cut that 25 cannot.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from babelrag.errors import ConfigError
from babelrag.evaluate.clusters import cluster_keys, cluster_means
from babelrag.evaluate.metrics import recall_at


def _recall(rows: Sequence[Mapping[str, Any]], clusters: Sequence[str], tau: float, k: int) -> tuple[float, float]:
    """Recall@k and documents passed at τ, each question (cluster) counted once."""
    recalls, passed = [], []
    for row in rows:
        kept = [h["doc_id"] for h in row["evidence"] if h["score"] >= tau][:k]
        recalls.append(recall_at(kept, row["gold_pages"], k))
        passed.append(len(kept))
    return float(np.mean(cluster_means(recalls, clusters))), float(np.mean(cluster_means(passed, clusters)))


def written(tau: float) -> float:
    """τ as stored, with 6 decimals and rounded down: run rows keep scores to 6 decimals, so a τ read
    off them could otherwise sit just above the true score of the passage it was meant to keep."""
    return math.floor(tau * 1e6 - 0.5) / 1e6


def min_questions(budget: float) -> int:
    """Calibration questions a budget needs before it allows any cut: (0 + 1)/(n + 1) ≤ budget."""
    return max(0, int(np.ceil(1 / budget - 1 - 1e-9))) if budget > 0 else -1


def calibrate_threshold(rows: Sequence[Mapping[str, Any]], budget: float = 0.005, k: int = 10,
                        split: str | None = "dev", allow_all: bool = False, new_questions: bool = True) -> dict[str, Any]:
    """τ from the ``split`` questions only; scoring it on those same questions would flatter it, so
    without a dev split calibration is refused unless ``allow_all`` (then every question is used,
    and the result says so). ``new_questions=False``: the budget bounds the calibration questions'
    own loss only (a cap for a τ vouched for elsewhere)."""
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
    clusters = cluster_keys(chosen)
    n = len(set(clusters))  # questions: the independent draws the bound counts
    base, base_passed = _recall(chosen, clusters, float("-inf"), k)

    def bound(loss: float) -> float:  # the expected loss on a new question, or the calibration questions' own
        return (n * loss + 1) / (n + 1) if new_questions else loss

    best = None
    for tau in sorted({h["score"] for r in chosen for h in r["evidence"]}):
        recall, passed = _recall(chosen, clusters, tau, k)
        if bound(base - recall) > budget + 1e-12:
            break
        best = (tau, recall, passed)
    tau, recall, passed = best if best else (None, base, base_passed)  # None: no cut keeps the budget
    return {"threshold": tau, "budget": budget, "n": n, "rows": len(chosen), "split": used_split,
            "recall_before": base, "recall_after": recall, "docs_passed_before": base_passed,
            "docs_passed_after": passed, "loss_bound": bound(base - recall) if best else None,
            "bound": "new questions" if new_questions else "calibration questions",
            **({"too_few": f"{n} questions vouch for no cut at budget {budget} (needs {min_questions(budget)})"}
               if new_questions and best is None and n < min_questions(budget) else {})}
