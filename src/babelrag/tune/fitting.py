"""Fitting the relevance model on dev candidates, choosing its feature set by grouped cross-validation.

Two nested models compete: ``full`` (every feature: cross-lingual evidence, coverage, path kind) and
``hybrid`` (one feature, the hybrid preset's own z-score fusion total — calibrated hybrid order; recomputed from
the candidates' cosines on a path whose arms were not fused).
Where every page exists in the question's language (a parallel KB) the plain hybrid order is hard to
beat and ``full`` can trade a little of it for cross-lingual evidence it does not need; the choice is
made on held-out dev questions (5 folds, grouped by question and its translations — or by article),
never on the questions reported. The chosen model is refitted with its fold models (``crossfit``), so
every later measurement on the dev questions — options, thresholds — is out-of-fold.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from babelrag.errors import ConfigError
from babelrag.relevance.features import HYBRID_PRESET, MODEL_FEATURES
from babelrag.relevance.learn import crossfit, fit, group_folds
from babelrag.relevance.model import RelevanceModel, question_hash
from babelrag.tune.training import Candidates

VARIANTS: dict[str, tuple[str, ...]] = {"full": MODEL_FEATURES, "hybrid": (HYBRID_PRESET,)}
FOLDS = 5
SIMPLEST_FIRST = ("hybrid", "shipped", "full")  # ties go to the model with fewer fitted parameters


def path_mrr(candidates: Candidates, scores: np.ndarray, k: int = 10, rows: np.ndarray | None = None) -> float:
    """MRR@k of one path per question, its candidates ordered by ``scores`` (page relevance per row), one
    reciprocal rank per question (ties keep retrieval order). ``rows``: which rows are that path (default: the
    question as written)."""
    first = candidates.path == 0 if rows is None else rows
    if not first.any():
        return 0.0
    question, score, label = candidates.question[first], scores[first], candidates.labels[first]
    order = np.lexsort((-score, question))  # by question, then best score first; stable within ties
    question, label = question[order], label[order]
    starts = np.flatnonzero(np.r_[True, question[1:] != question[:-1]])
    rank = np.arange(len(question)) - np.repeat(starts, np.diff(np.r_[starts, len(question)]))
    found = np.where((label > 0) & (rank < k), rank, k)
    best = np.minimum.reduceat(found, starts)
    return float(np.mean(np.where(best < k, 1.0 / (best + 1), 0.0)))


def top_of_each_path(candidates: Candidates, scores: np.ndarray) -> np.ndarray:
    """The row of each path's best-scored candidate: the probability a user reads first."""
    keys = candidates.path_keys()
    if len(keys) == 0:
        return np.zeros(0, dtype=np.intp)
    order = np.lexsort((-scores, keys))
    return order[np.r_[True, keys[order][1:] != keys[order][:-1]]]


def _subset(candidates: Candidates, rows: np.ndarray) -> Candidates:
    return replace(candidates, rows=candidates.rows[rows], labels=candidates.labels[rows],
                   question=candidates.question[rows], path=candidates.path[rows], path_lang=candidates.path_lang[rows])


def fit_crossfitted(candidates: Candidates, meta: Mapping[str, Any], c: float = 1.0,
                    features: Sequence[str] = MODEL_FEATURES) -> RelevanceModel:
    """The model on the candidates, with fold models by group (each question scored out-of-fold)."""
    return crossfit(candidates.rows, candidates.labels, candidates.row_groups(), candidates.group_texts(),
                    candidates.path_keys(), meta, c, features, FOLDS)


def out_of_fold_rows(model: RelevanceModel, candidates: Candidates, k: int = 10) -> list[dict[str, Any]]:
    """Each question's as-written path ranked by the fold model that held it out, as calibration rows (one
    cluster per group: a question's translations count once)."""
    rows = []
    first = candidates.path == 0
    for question in np.unique(candidates.question[first]):
        index = np.where(first & (candidates.question == question))[0]
        scores = model.for_question(candidates.asked[question].question).predict(candidates.rows[index],
                                                                                  np.zeros(len(index)))
        order = np.argsort(-scores, kind="stable")[:k]
        asked = candidates.asked[question]
        rows.append({"id": asked.id, "tags": {"qid": candidates.qids[question]},
                     "gold_pages": ["gold"], "evidence": [
                         {"doc_id": "gold" if candidates.labels[index[i]] > 0 else f"other{index[i]}",
                          "score": float(scores[i])} for i in order]})
    return rows


def out_of_fold_scores(candidates: Candidates, features: Sequence[str], c: float = 1.0) -> np.ndarray:
    """Every row's score from a model fitted on the other folds (folds by group); rows of a fold that had
    nothing to fit on score 0."""
    scores = np.zeros(len(candidates.rows))
    paths = candidates.path_keys()
    for train, held in group_folds(candidates.row_groups(), FOLDS):
        try:
            model = fit(candidates.rows[train], candidates.labels[train], paths[train], {}, c, features)
        except ConfigError:  # nothing to rank or calibrate on this side
            continue
        scores[held] = model.predict(candidates.rows[held], paths[held])
    return scores


def _scored_per_question(candidates: Candidates, scorer_for: Callable[[int], RelevanceModel]) -> np.ndarray:
    """Every row's P(relevant), each question's rows scored by ``scorer_for(question)``."""
    scores, paths = np.zeros(len(candidates.rows)), candidates.path_keys()
    order = np.argsort(candidates.question, kind="stable")
    for rows in np.split(order, np.flatnonzero(np.diff(candidates.question[order])) + 1):
        if len(rows):
            scores[rows] = scorer_for(int(candidates.question[rows[0]])).predict(candidates.rows[rows], paths[rows])
    return scores


def scores_by_question(model: RelevanceModel, candidates: Candidates) -> np.ndarray:
    """Every row's P(relevant), each question's rows scored by the model for that question: the fold model that
    held it out when the model was fitted on it (``RelevanceModel.for_question``)."""
    return _scored_per_question(candidates, lambda question: model.for_question(candidates.asked[question].question))


def held_out_scores(model: RelevanceModel, candidates: Candidates) -> np.ndarray:
    """Every row's P(relevant) from a model that never saw its question: a question whose group (the question and
    its translations, or its article) holds any text the model was fitted on is scored by the fold model that held
    that text out — a translation the model never saw by its fitted sibling's fold, never by weights that saw the
    sibling — and the rest by the model itself."""
    fold_of_group: dict[str, int] = {}
    for group, text in zip(candidates.groups, candidates.texts):
        if (fold := model.fold_of.get(question_hash(text))) is not None:
            fold_of_group.setdefault(group, fold)

    def scorer_for(question: int) -> RelevanceModel:
        fold = fold_of_group.get(candidates.groups[question])
        return model if fold is None else model.folds[fold]

    return _scored_per_question(candidates, scorer_for)


def reliability(scores: np.ndarray, labels: np.ndarray, bins: int = 10) -> list[tuple[int, float, float]]:
    """(candidates, mean predicted, observed rate) per decile of prediction: is P(relevant) what it says?"""
    if len(scores) == 0:
        return []
    order = np.argsort(scores, kind="stable")
    return [(len(part), float(scores[part].mean()), float(labels[part].mean()))
            for part in np.array_split(order, min(bins, len(order))) if len(part)]


def cross_validate(candidates: Candidates, variants: Mapping[str, tuple[str, ...]] = VARIANTS,
                   fixed: Mapping[str, RelevanceModel] | None = None, c: float = 1.0) -> dict[str, float]:
    """Each variant's MRR@10 on held-out dev questions (folds by group: no question has a translation on
    the other side); ``fixed`` models are scored on the same folds without fitting, a question one of them was
    fitted on (or a translation of one) by its fold model that held the question out (``held_out_scores``)."""
    splits = group_folds(candidates.row_groups(), FOLDS)
    if not splits:
        raise ConfigError("relevance model: cross-validation needs dev questions of at least 2 groups (a question "
                          "and its translations are one)")
    results: dict[str, list[float]] = {name: [] for name in [*variants, *(fixed or {})]}
    paths = candidates.path_keys()
    for train, held in splits:
        try:
            fitted = {name: fit(candidates.rows[train], candidates.labels[train], paths[train], {}, c, features)
                      for name, features in variants.items()}
        except ConfigError:
            continue  # nothing to rank or calibrate on: the fold is skipped for every model, so all see the same folds
        part = _subset(candidates, held)
        for name, model in (fixed or {}).items():
            results[name].append(path_mrr(part, held_out_scores(model, part)))
        for name, model in fitted.items():
            results[name].append(path_mrr(part, model.predict(part.rows, paths[held])))
    if not any(results.values()):
        raise ConfigError("relevance model: no fold had both relevant and irrelevant candidates to fit on")
    return {name: float(np.mean(values)) for name, values in results.items()}


def fit_selected(candidates: Candidates, meta: Mapping[str, Any], shipped: RelevanceModel, min_full: int = 30,
                 c: float = 1.0, texts: Sequence[str] = ()) -> tuple[RelevanceModel, dict]:
    """The model with the best cross-validated MRR — refitted ``hybrid`` (calibrated hybrid order),
    refitted ``full`` (only with ``min_full`` dev question versions or more: it has 20 weights) or the ``shipped``
    model as it is. Where it was fitted on some of these questions (``texts``) it competes only if each of them
    is scored by a fold model that held it out (the shipped model's own fold models, by article): scoring it
    with the weights that saw them would flatter it. Ties go to the simplest."""
    questions = len(np.unique(candidates.question))
    variants = {name: VARIANTS[name] for name in ("hybrid", *(("full",) if questions >= min_full else ()))}
    seen = shipped.fitted_on(texts)
    held_out = seen if seen and shipped.scores_out_of_fold(texts) else 0
    left_out = seen - held_out
    scores = cross_validate(candidates, variants, {} if left_out else {"shipped": shipped}, c)
    chosen = max((name for name in SIMPLEST_FIRST if name in scores),
                 key=lambda name: (round(scores[name], 6), -SIMPLEST_FIRST.index(name)))
    report = {"variant": chosen, "cv_mrr": {k: round(v, 4) for k, v in scores.items()}, "folds": FOLDS,
              **({"shipped_left_out": f"the shipped model was fitted on {left_out} of these questions"}
                 if left_out else {}),
              **({"shipped_out_of_fold": f"the shipped model was fitted on {held_out} of these questions; each was "
                                         f"scored by its fold model that held it out"} if held_out else {})}
    if chosen == "shipped":
        return shipped, report
    return fit_crossfitted(candidates, {**meta, "variant": chosen, "cv": report}, c, VARIANTS[chosen]), report
