"""Fitting the relevance model on dev candidates, choosing its feature set by grouped cross-validation.

Two nested models compete: ``full`` (every feature: cross-lingual evidence, coverage, path kind) and
``hybrid`` (one feature, zscore fusion's own combination of the arms — calibrated hybrid order).
Where every page exists in the question's language (a parallel KB) the plain hybrid order is hard to
beat and ``full`` can trade a little of it for cross-lingual evidence it does not need; the choice is
made on held-out dev questions (5 folds, grouped by question), never on the questions reported.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from babelrag.errors import ConfigError
from babelrag.evaluate.calibrate import calibrate_threshold
from babelrag.relevance.features import FEATURES
from babelrag.relevance.model import RelevanceModel, fit
from babelrag.tune.training import Candidates

VARIANTS: dict[str, tuple[str, ...]] = {"full": FEATURES, "hybrid": ("hybrid",)}
FOLDS = 5
SIMPLEST_FIRST = ("hybrid", "shipped", "full")  # ties go to the model with fewer fitted parameters


def path_mrr(candidates: Candidates, scores: np.ndarray, k: int = 10) -> float:
    """MRR@k of the as-written path's candidates ordered by ``scores`` (page relevance per row)."""
    reciprocal = []
    first = candidates.path == 0
    for question in np.unique(candidates.question[first]):
        rows = np.where(first & (candidates.question == question))[0]
        order = rows[np.argsort(-scores[rows], kind="stable")][:k]
        hits = np.where(candidates.labels[order] > 0)[0]
        reciprocal.append(1.0 / (hits[0] + 1) if len(hits) else 0.0)
    return float(np.mean(reciprocal)) if reciprocal else 0.0


def _subset(candidates: Candidates, rows: np.ndarray) -> Candidates:
    return Candidates(candidates.rows[rows], candidates.labels[rows], candidates.question[rows],
                      candidates.path[rows], candidates.path_lang[rows], candidates.ids, candidates.cells)


def out_of_fold_tau(candidates: Candidates, features: Sequence[str], budget: float = 0.005, k: int = 10,
                    c: float = 1.0) -> float | None:
    """The threshold for a model with these features: the largest τ keeping the expected Recall@k loss of
    the as-written path on new questions within ``budget``, on scores each question got from a model fitted
    without it (two halves); None when the questions vouch for no cut."""
    questions = np.unique(candidates.question)
    rows = []
    for half in (0, 1):
        held = questions[half::2]
        train = ~np.isin(candidates.question, held)
        if candidates.labels[train].min() == candidates.labels[train].max():
            return None
        model = fit(candidates.rows[train], candidates.labels[train], {}, c, features)
        for question in held:
            index = np.where((candidates.question == question) & (candidates.path == 0))[0]
            scores = model.predict(candidates.rows[index])
            order = index[np.argsort(-scores, kind="stable")][:k]
            ranked = dict(zip(index, scores))
            rows.append({"gold_pages": ["gold"], "evidence": [
                {"doc_id": "gold" if candidates.labels[i] > 0 else f"other{i}", "score": float(ranked[i])}
                for i in order]})
    return calibrate_threshold(rows, budget=budget, k=k, split=None, allow_all=True)["threshold"]


def cross_validate(candidates: Candidates, variants: Mapping[str, tuple[str, ...]] = VARIANTS,
                   fixed: Mapping[str, RelevanceModel] | None = None, c: float = 1.0) -> dict[str, float]:
    """Each variant's MRR@10 on held-out dev questions (grouped folds); ``fixed`` models are scored on
    the same folds without fitting."""
    from sklearn.model_selection import GroupKFold

    questions = np.unique(candidates.question)
    folds = min(FOLDS, len(questions))
    if folds < 2:
        raise ConfigError("relevance model: cross-validation needs at least 2 dev questions")
    results: dict[str, list[float]] = {name: [] for name in [*variants, *(fixed or {})]}
    for train, held in GroupKFold(n_splits=folds).split(candidates.rows, groups=candidates.question):
        if candidates.labels[train].min() == candidates.labels[train].max():
            continue  # nothing to fit on: the fold is skipped for every model, so all see the same folds
        part = _subset(candidates, held)
        for name, model in (fixed or {}).items():
            results[name].append(path_mrr(part, model.predict(part.rows)))
        for name, features in variants.items():
            model = fit(candidates.rows[train], candidates.labels[train], {}, c, features)
            results[name].append(path_mrr(part, model.predict(part.rows)))
    if not any(results.values()):
        raise ConfigError("relevance model: no fold had both relevant and irrelevant candidates to fit on")
    return {name: float(np.mean(values)) for name, values in results.items()}


def fit_selected(candidates: Candidates, meta: Mapping[str, Any], shipped: RelevanceModel, min_full: int = 30,
                 c: float = 1.0, texts: Sequence[str] = ()) -> tuple[RelevanceModel, dict]:
    """The model with the best cross-validated MRR — refitted ``hybrid`` (calibrated hybrid order),
    refitted ``full`` (only with ``min_full`` dev questions or more: it has 20 weights) or the ``shipped``
    model as it is, unless it was fitted on some of these questions (``texts``: scoring it on them
    would flatter it) — ties to the simplest."""
    questions = len(np.unique(candidates.question))
    variants = {name: VARIANTS[name] for name in ("hybrid", *(("full",) if questions >= min_full else ()))}
    seen = shipped.fitted_on(texts)
    scores = cross_validate(candidates, variants, {} if seen else {"shipped": shipped}, c)
    chosen = max((name for name in SIMPLEST_FIRST if name in scores),
                 key=lambda name: (round(scores[name], 6), -SIMPLEST_FIRST.index(name)))
    report = {"variant": chosen, "cv_mrr": {k: round(v, 4) for k, v in scores.items()}, "folds": FOLDS,
              **({"shipped_left_out": f"the shipped model was fitted on {seen} of these questions"} if seen else {})}
    if chosen == "shipped":
        return shipped, report
    model = fit(candidates.rows, candidates.labels, {**meta, "variant": chosen, "cv": report}, c, VARIANTS[chosen])
    return model, report
