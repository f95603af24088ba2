"""Fitting the relevance model on dev candidates, choosing its feature set by grouped cross-validation.

Two nested models compete: ``full`` (every feature: cross-lingual evidence, coverage, path kind) and
``hybrid`` (one feature, the hybrid preset's own z-score fusion total — calibrated hybrid order; recomputed from
the candidates' cosines on a path whose arms were not fused).
Where every page exists in the question's language (a parallel KB) the plain hybrid order is hard to
beat and ``full`` can trade a little of it for cross-lingual evidence it does not need; the choice, between them
and the shipped model, is made on held-out dev questions (5 folds, grouped by question and its translations —
or by article) by the one-standard-error rule, never on the questions reported. The chosen model is refitted
with its fold models (``crossfit``), so every later measurement on the dev questions — options, thresholds — is
out-of-fold.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from babelrag.errors import ConfigError
from babelrag.evaluate.clusters import cluster_key, clustered_standard_error
from babelrag.evaluate.golden import GoldenQuestion
from babelrag.relevance.features import FEATURES, HYBRID_PRESET, MODEL_FEATURES
from babelrag.relevance.learn import crossfit, fit, group_folds
from babelrag.relevance.model import RelevanceModel, question_hash
from babelrag.tune.training import Candidates

VARIANTS: dict[str, tuple[str, ...]] = {"full": MODEL_FEATURES, "hybrid": (HYBRID_PRESET,)}
FOLDS = 5
# the model least shaped by the KB's own dev questions first: the shipped model (fitted on every layout of the bench's
# data; on its own training questions it competes only through fold models that held them out), then the hybrid
# variant (one weight fitted here), then the full variant (one per feature)
SIMPLEST_FIRST = ("shipped", "hybrid", "full")
# dev articles (pages, where a page's id names no article) the full refit (a weight per feature) needs before it
# competes with the shipped model, which was fitted on 31 article groups: the article, not the question, is what a
# refit's lead on dev must carry to. Measured with ``benchmarks/refit_rule.py`` on test articles the shipped model
# never saw: on twenty quick deals the one-standard-error rule refitted 24 times on XQuAD KBs of 1–8 dev articles
# and lost 18 (−0.002 and −0.003 MRR overall); on two full-size deals (7–8 dev articles, 169–194 dev questions) its
# XQuAD refits won 4 of 5 in one and 3 of 5 in the other, which lost two, one by 0.091 (+0.004 and −0.005 overall).
# No XQuAD KB has 30 articles in dev; on two more sets of deals, chosen after this line, it kept the shipped model
# there and lost nothing (docs/results/relevance.md).
MIN_REFIT_ARTICLES = 30
# the hybrid refit (one weight: the hybrid preset's own order, calibrated) competes at any size. On the full-size
# pooled KB (8 dev articles) the rule took it on four full deals and it won every time (+0.008; on the fourth, 204,
# with predictions written first, alone against the shipped model below this line); on fifty quick deals it was
# chosen six times, all on the pooled KB (four won, one tied, one lost 0.003: ±0.000 overall); the
# one-standard-error rule does not take it where the hybrid order is poor (always taken there: −0.160) (docs/results/relevance.md)
MIN_HYBRID_REFIT_ARTICLES = 0


def dev_articles(asked: Sequence[GoldenQuestion]) -> int:
    """How many articles (pages, where a page's id names no article) the dev questions come from: the unit a refit's
    lead on dev must carry to."""
    return len({cluster_key(q.model_dump(), "article") for q in asked})


def path_mrr(candidates: Candidates, scores: np.ndarray, k: int = 10, rows: np.ndarray | None = None) -> float:
    """MRR@k of one path per question, its candidates ordered by ``scores`` (page relevance per row), one
    reciprocal rank per question (ties keep retrieval order). ``rows``: which rows are that path (default: the
    question as written)."""
    _, ranks = reciprocal_ranks(candidates, scores, k, rows)
    return float(ranks.mean()) if len(ranks) else 0.0


def reciprocal_ranks(candidates: Candidates, scores: np.ndarray, k: int = 10,
                     rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each question's number and reciprocal rank@k (0 past k) of its first relevant candidate on one path, the
    candidates ordered by ``scores`` (ties keep retrieval order); questions in increasing number."""
    first = candidates.path == 0 if rows is None else rows
    if not first.any():
        return np.zeros(0, dtype=np.intp), np.zeros(0)
    question, score, label = candidates.question[first], scores[first], candidates.labels[first]
    order = np.lexsort((-score, question))  # by question, then best score first; stable within ties
    question, label = question[order], label[order]
    starts = np.flatnonzero(np.r_[True, question[1:] != question[:-1]])
    rank = np.arange(len(question)) - np.repeat(starts, np.diff(np.r_[starts, len(question)]))
    found = np.where((label > 0) & (rank < k), rank, k)
    best = np.minimum.reduceat(found, starts)
    return question[starts], np.where(best < k, 1.0 / (best + 1), 0.0)


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
    qids = candidates.qids  # built once: each is a question's serialised form
    for question in np.unique(candidates.question[first]):
        index = np.where(first & (candidates.question == question))[0]
        scores = model.for_question(candidates.asked[question].question).predict(candidates.rows[index],
                                                                                  np.zeros(len(index)))
        order = np.argsort(-scores, kind="stable")[:k]
        asked = candidates.asked[question]
        rows.append({"id": asked.id, "tags": {"qid": qids[question]},
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


@dataclass(frozen=True)
class HeldOut:
    """Every model's reciprocal rank on each dev question, each question scored by a model that never saw its
    group; ``groups``: each question's group (a question and its translations, or its article)."""

    groups: np.ndarray
    ranks: dict[str, np.ndarray]
    folds: int = 0  # the folds scored
    unfitted: int = 0  # the folds left out: nothing to rank or calibrate on their training side

    def mrr(self) -> dict[str, float]:
        return {name: float(ranks.mean()) for name, ranks in self.ranks.items()}

    def shortfall(self, name: str, best: str) -> tuple[float, float]:
        """How far ``name``'s held-out MRR (a mean over questions) is below ``best``'s, and the standard error of that
        difference with a group's questions as one sample (paired: the same questions; the cluster-robust error of
        a mean, groups of any size). Fewer than 2 groups have no error to measure (``ValueError``: a bug upstream)."""
        gaps = self.ranks[best] - self.ranks[name]
        return float(gaps.mean()), clustered_standard_error(gaps, list(self.groups))


def held_out_ranks(candidates: Candidates, variants: Mapping[str, tuple[str, ...]] = VARIANTS,
                   fixed: Mapping[str, RelevanceModel] | None = None, c: float = 1.0) -> HeldOut:
    """Each variant's reciprocal rank on every held-out dev question (folds by group: no question has a translation
    on the other side; a question whose search as written found nothing counts 0 for every model); ``fixed`` models are scored on the same folds without fitting, a question one of them was
    fitted on (or a translation of one) by its fold model that held the question out (``held_out_scores``)."""
    splits = group_folds(candidates.row_groups(), FOLDS)
    if not splits:
        raise ConfigError("relevance model: cross-validation needs dev questions of at least 2 groups (a question "
                          "and its translations are one)")
    names = [*variants, *(fixed or {})]
    ranks: dict[str, list[np.ndarray]] = {name: [] for name in names}
    questions: list[np.ndarray] = []
    paths = candidates.path_keys()
    unfitted = 0
    for train, held in splits:
        try:
            fitted = {name: fit(candidates.rows[train], candidates.labels[train], paths[train], {}, c, features)
                      for name, features in variants.items()}
        except ConfigError:  # nothing to rank or calibrate on: skipped for every model, so all see the same folds
            unfitted += 1
            continue
        part = _subset(candidates, held)
        scored = {**{name: held_out_scores(model, part) for name, model in (fixed or {}).items()},
                  **{name: model.predict(part.rows, paths[held]) for name, model in fitted.items()}}
        for name in names:  # every model the same questions in the same order (they depend on no score)
            ranks[name].append(reciprocal_ranks(part, scored[name])[1])
        questions.append(reciprocal_ranks(part, np.zeros(len(part.rows)))[0])
    if not questions:
        raise ConfigError("relevance model: no fold had both relevant and irrelevant candidates to fit on")
    folds = len(questions)
    unfound = np.setdiff1d(np.arange(len(candidates.asked)), candidates.question[candidates.path == 0])
    if len(unfound):  # the question as written found nothing: no model can rank its gold, each scores 0 on it
        questions.append(unfound)
        for name in names:
            ranks[name].append(np.zeros(len(unfound)))
    groups = np.asarray(candidates.groups, dtype=object)[np.concatenate(questions)]
    if len(set(groups)) < 2:
        raise ConfigError("relevance model: cross-validation held out fewer than 2 groups of dev questions (a question "
                          "and its translations are one); tag more questions split=dev")
    return HeldOut(groups, {name: np.concatenate(values) for name, values in ranks.items()}, folds, unfitted)


def one_error_choice(held: HeldOut, simplest_first: Sequence[str]) -> tuple[str, str]:
    """The first of ``simplest_first`` whose held-out MRR is at most one standard error below the best's, and the
    best (ties to the simpler)."""
    scores = held.mrr()
    best = max(simplest_first, key=lambda name: (round(scores[name], 6), -simplest_first.index(name)))
    # the best itself (0 below, within any error) always qualifies
    return next(name for name in simplest_first if _within_one_error(*held.shortfall(name, best))), best


def _within_one_error(shortfall: float, error: float) -> bool:
    return shortfall <= error + 1e-12


def fit_selected(candidates: Candidates, meta: Mapping[str, Any], shipped: RelevanceModel | None, min_full: int = 30,
                 c: float = 1.0, texts: Sequence[str] = (),
                 min_articles: int = MIN_REFIT_ARTICLES,
                 min_hybrid_articles: int = MIN_HYBRID_REFIT_ARTICLES) -> tuple[RelevanceModel, dict]:
    """Among the ``shipped`` model as it is, refitted ``hybrid`` (calibrated hybrid order) and refitted ``full``
    (only with ``min_full`` dev question versions or more: it has a weight per feature), the one least shaped by
    these questions (``SIMPLEST_FIRST``) whose cross-validated MRR is within one standard error of the best's (the
    one-standard-error rule; the error of the paired difference over groups). A few dozen dev questions measure
    MRR to a few points: on the quick bench a refit that beat the shipped model by 2 points in cross-validation
    lost to it by 3 on test. Where the shipped model was fitted on some of these questions (``texts``) it
    competes only if each of them is scored by a fold model that held it out (the shipped model's own fold
    models, by article): scoring it with the weights that saw them would flatter it. ``shipped`` None: it does not
    fit this KB (fitted on another embedder's cosines), and only the refits compete. The full refit competes only with
    dev questions from ``min_articles`` articles or more (``MIN_REFIT_ARTICLES``), the hybrid one from
    ``min_hybrid_articles`` (``MIN_HYBRID_REFIT_ARTICLES``); where neither may, or the dev questions are too few to
    cross-validate on, the shipped model is kept untried and the report's ``refit`` says why."""
    articles = dev_articles(candidates.asked)
    lines = {"hybrid": min_hybrid_articles, "full": min_articles}
    held_back = {name: line for name, line in lines.items() if shipped is not None and articles < line}
    untried = {f"{name}_refit": f"not tried: the dev questions come from {articles} articles, and it competes from "
                                f"{line}" for name, line in held_back.items()}
    kept = {"variant": "shipped", "dev_articles": articles, **untried}
    questions = len(np.unique(candidates.question))
    variants = {name: VARIANTS[name] for name in lines
                if name not in held_back and (name != "full" or questions >= min_full)}
    if shipped is not None and not variants:
        return shipped, {**kept, "refit": f"not tried: the dev questions come from {articles} articles and "
                                          f"{questions} question versions, and a refit competes from "
                                          f"{min(lines.values())} articles (every feature from {min_full} versions)"}
    seen = shipped.fitted_on(texts) if shipped else 0
    held_out = seen if seen and shipped and shipped.scores_out_of_fold(texts) else 0
    left_out = seen - held_out
    try:
        held = held_out_ranks(candidates, variants, {"shipped": shipped} if shipped and not left_out else {}, c)
    except ConfigError as error:  # too little to cross-validate on: the shipped model, where there is one, stays
        if shipped is None:
            raise
        return shipped, {**kept, "refit": f"not tried: {error}"}
    scores = held.mrr()
    competing = [name for name in SIMPLEST_FIRST if name in scores]
    chosen, best = one_error_choice(held, competing)
    report = {"variant": chosen, "dev_articles": articles, **untried,
              "cv_mrr": {k: round(v, 4) for k, v in scores.items()}, "best": best,
              "below_best": {name: {"mrr": round(gap, 4), "standard_error": round(error, 4)}
                             for name in competing if name != best for gap, error in [held.shortfall(name, best)]},
              "folds": held.folds, **({"folds_unfitted": held.unfitted} if held.unfitted else {}),
              **({"shipped_left_out": f"the shipped model was fitted on {left_out} of these questions"}
                 if left_out else {}),
              **({"shipped_left_out": "the shipped model was fitted on another embedder's cosines"}
                 if shipped is None else {}),
              **({"shipped_out_of_fold": f"the shipped model was fitted on {held_out} of these questions; each was "
                                         f"scored by its fold model that held it out"} if held_out else {})}
    if chosen == "shipped" and shipped is not None:
        return shipped, report
    return fit_crossfitted(candidates, {**meta, "variant": chosen, "cv": report}, c, VARIANTS[chosen]), report


CLEAR_MARGIN = 0.02  # how much closer than every same-language page a cross-lingual gold page must be to be clear


def clear_paths(candidates: Candidates) -> tuple[list[tuple[int, np.ndarray]], list[tuple[int, np.ndarray]]]:
    """As-written paths with one gold row whose right order is clear from what retrieval saw, never from a model:
    *cross-lingual clear* — the gold page in another language than the question, the path's closest candidate and
    ``CLEAR_MARGIN`` closer than every page in the question's language, one of which has the path's best keyword
    match — as (gold row, the path's same-language rows); *native clear* — the gold page in the question's language,
    the path's top by cosine and by BM25 — as (gold row, the path's rows). What a model must not get wrong whichever
    language the gold page is in (``benchmarks/clear_paths.py``)."""
    dense, keyword, same = (candidates.rows[:, FEATURES.index(name)] for name in ("dense", "bm25_norm", "same_lang"))
    cross, native = [], []
    first = candidates.path == 0
    for question in np.unique(candidates.question[first]):
        rows = np.flatnonzero(first & (candidates.question == question))
        gold, mine = rows[candidates.labels[rows] > 0], rows[same[rows] > 0]
        if len(gold) != 1 or not len(mine) or dense[gold[0]] < dense[rows].max():
            continue
        if same[gold[0]] == 0:
            if dense[gold[0]] >= dense[mine].max() + CLEAR_MARGIN and \
                    keyword[mine].max() >= max(keyword[rows].max(), 1e-9):
                cross.append((int(gold[0]), mine))
        elif keyword[gold[0]] >= max(keyword[rows].max(), 1e-9):
            native.append((int(gold[0]), rows))
    return cross, native


def clear_path_rates(candidates: Candidates, scores: np.ndarray) -> dict[str, int | float]:
    """How an order (``scores``, one per row) does on ``clear_paths``: the share of cross-lingual clear paths whose
    gold page it puts above every same-language page, and of native clear paths whose gold page it keeps first and in
    its top three (nan where there are none), with both counts."""
    cross, native = clear_paths(candidates)
    above = [scores[gold] > scores[mine].max() for gold, mine in cross]
    ranks = np.array([(scores[rows] > scores[gold]).sum() for gold, rows in native])
    return {"cross-lingual paths": len(cross), "gold above": _share(above), "native paths": len(native),
            "first": _share(ranks == 0), "top three": _share(ranks < 3)}


def _share(hits: Sequence[bool] | np.ndarray) -> float:
    """The share of true values (nan for none at all)."""
    return float(np.mean(hits)) if len(hits) else float("nan")
