"""Learning the relevance model from labelled candidates: weights fitted to rank each path's candidates
(``listwise.py``), weights of their own for pivot-copy paths, a calibration per path kind (``calibration.py``), and
fold models that keep every training question's scores out-of-fold (``crossfit``). The model itself, and how it
predicts and travels, is ``model.py``.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from importlib.metadata import version
from typing import Any

import numpy as np

from babelrag.errors import ConfigError
from babelrag.relevance.calibration import MIN_SLOPE, PATH_SOFTMAX, CalibrationError, monotone_logistic
from babelrag.relevance.features import FEATURES, PIVOT_COPY
from babelrag.relevance.listwise import listwise_weights
from babelrag.relevance.model import PATH_KINDS, RelevanceModel, path_kinds, question_hash

OWN_WEIGHTS = "pivot_copies"  # the path kind ``fit`` gives weights of its own (with enough of its paths to rank)
MIN_OWN_PATHS = 30  # paths with a relevant and another candidate needed to fit them; fewer: the shared weights


def fit(rows: np.ndarray, labels: np.ndarray, paths: np.ndarray, meta: Mapping[str, Any], c: float = 1.0,
        features: Sequence[str] = FEATURES, anchor: RelevanceModel | None = None) -> RelevanceModel:
    """Standardise ``features`` (rows hold all ``FEATURES``), fit the weights to rank each path's candidates
    (``listwise.py``; ``paths``: each row's path, ``c``: inverse regularisation strength) on every path but
    the pivot-copy ones, which get weights of their own when there are ``MIN_OWN_PATHS`` of them to rank (a copy's
    features depend on its translator), then calibrate every kind of path on all the rows (``recalibrate``).
    ``anchor``: a model of the same features whose shared weights the fit shrinks toward instead of toward zero
    (``anchor_weights``), so a few dev questions refit it only where they are clear."""
    if len(rows) == 0 or labels.min() == labels.max():
        raise ConfigError("relevance model: the training candidates need both relevant and irrelevant passages")
    chosen = rows[:, [FEATURES.index(name) for name in features]]
    mean, scale = chosen.mean(axis=0), chosen.std(axis=0)
    scale[scale == 0] = 1.0
    standardised = (chosen - mean) / scale
    own = rows[:, FEATURES.index(PIVOT_COPY)] == 0
    prior = None if anchor is None else anchor_weights(anchor, tuple(features), scale)
    coef = listwise_weights(standardised[own], labels[own], paths[own], c, prior)
    copies = ~own
    kind_coef = ({OWN_WEIGHTS: listwise_weights(standardised[copies], labels[copies], paths[copies], c)}
                 if rankable_paths(labels[copies], paths[copies]) >= MIN_OWN_PATHS else {})
    model = RelevanceModel(tuple(features), mean, scale, coef, 0.0,
                           {**meta, "candidates": int(len(rows)), "relevant": int(labels.sum()), "C": c,
                            "objective": "listwise (conditional logit per path)",
                            **({"anchored_on": anchor.meta.get("name", "a model")} if anchor is not None else {}),
                            "fitted_at": datetime.now(UTC).isoformat(timespec="seconds"),
                            "scikit-learn": version("scikit-learn")}, kind_coef=kind_coef)
    return recalibrate(model, rows, labels, paths)


def anchor_weights(anchor: RelevanceModel, features: tuple[str, ...], scale: np.ndarray) -> np.ndarray:
    """``anchor``'s shared weights re-expressed on a fit's standardisation (``scale``: that fit's, per feature): the
    same logit up to a constant per path, which the ranking ignores."""
    if anchor.features != features:
        raise ConfigError("relevance model: a fit shrinks toward a model of the same features only")
    return anchor.coef / anchor.scale * scale


def rankable_paths(labels: np.ndarray, paths: np.ndarray) -> int:
    """How many paths have a relevant and an irrelevant candidate: what ranking weights can learn from."""
    if len(paths) == 0:
        return 0
    _, path_of = np.unique(paths, return_inverse=True)
    relevant = np.bincount(path_of, weights=labels > 0)
    return int(((relevant > 0) & (relevant < np.bincount(path_of))).sum())


def group_folds(row_groups: np.ndarray, folds: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train rows, held-out rows) per fold, whole groups on one side (``GroupKFold``, at most one fold per
    group): a question's translations — or an article's pages — are never split between the sides."""
    from sklearn.model_selection import GroupKFold

    n = min(folds, len(np.unique(row_groups)))
    return list(GroupKFold(n_splits=n).split(np.zeros(len(row_groups)), groups=row_groups)) if n >= 2 else []


def recalibrate(model: RelevanceModel, rows: np.ndarray, labels: np.ndarray, paths: np.ndarray) -> RelevanceModel:
    """The same ranking within every path, made a probability for each kind of path (as written, translated,
    generated, pivot copies): per kind a logistic fit of the labels on the model's logit, its softmax share of
    the path (``paths``: each row's path) and the path's context (``calibration_inputs``; ``calibration.py``).
    Needed because ranking weights have no scale of their own, because a model's text scores on another scale
    than the question's own, and because how many candidates are relevant depends on the layout (eight language
    versions of a page, or one) and on the pool. A kind without both labels here, or whose score does not rise
    with relevance, borrows the as-written calibration, and is then ranked by the shared weights too (its own
    weights' logits are on another scale than the calibration it would borrow)."""
    kinds = path_kinds(rows)
    calibration = {}
    for kind in PATH_KINDS:
        mine = kinds == kind
        if mine.sum() and labels[mine].min() != labels[mine].max():
            fitted = _kind_calibration(model, rows[mine], labels[mine], paths[mine])
            if fitted is not None:
                calibration[kind] = fitted
    if "as_written" not in calibration and (kinds == "as_written").any():
        raise ConfigError("relevance model: on the as-written paths the weights do not rank relevant candidates "
                          "higher, or no path has both kinds of candidate")
    return replace(model, calibration=calibration, kind_coef=_calibrated_only(model.kind_coef, calibration))


def _calibrated_only(kind_coef: Mapping[str, np.ndarray], calibration: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The kinds' own weights, for the kinds calibrated on them."""
    return {kind: coef for kind, coef in kind_coef.items() if kind in calibration}


def _kind_calibration(model: RelevanceModel, rows: np.ndarray, labels: np.ndarray,
                      paths: np.ndarray) -> tuple[float, ...] | None:
    """(slope, offset, weight per calibration input) on these rows (both labels needed), the weight on the logit
    kept positive and the one on the path softmax ≥ 0 (as ``recalibrate`` does per kind); None when the slope
    sits at its floor: the logit does not rise with relevance on these rows."""
    logits = model.logits(rows)
    inputs = np.column_stack([logits, model.calibration_context(rows, logits, paths)])
    increasing = [0, *(1 + i for i, name in enumerate(model.calibration_inputs) if name == PATH_SOFTMAX)]
    try:
        slope, *weights, offset = (float(w) for w in monotone_logistic(inputs, labels, increasing))
    except CalibrationError as error:  # the fit's own words: no input in them (any other error is a bug: it stops)
        raise ConfigError(f"relevance model: {error}") from error
    if not np.isfinite([slope, offset, *weights]).all():
        raise ConfigError("relevance model: the calibration did not converge to finite weights")
    if slope * logits.std() <= MIN_SLOPE * (1 + 1e-6):
        return None
    return (slope, offset, *weights)


def fit_kind(model: RelevanceModel, kind: str, rows: np.ndarray, labels: np.ndarray, texts: Sequence[str],
             paths: np.ndarray, c: float = 1.0) -> RelevanceModel:
    """The model with weights of its own for one more kind of path, fitted to rank that kind's candidates
    (``listwise.py``, on the model's standardisation), then calibrated for it (``calibrate_kind``). As there, a fold
    model learns them without the questions it holds out (``texts``: each row's question as asked), so a training
    question is still scored out-of-fold; a fold left with fewer than ``MIN_OWN_PATHS`` paths to rank, or whose
    own weights do not calibrate, ranks the kind by the shared weights (counted in the model's ``meta``,
    ``folds_with_shared_weights``). The other kinds are unchanged."""
    _check_kind_rows(kind, rows, labels, texts)

    def own(fitted: RelevanceModel, mine: np.ndarray) -> RelevanceModel:
        if rankable_paths(labels[mine], paths[mine]) < MIN_OWN_PATHS:
            return replace(fitted, kind_coef={k: v for k, v in fitted.kind_coef.items() if k != kind})
        standardised = (rows[mine][:, fitted._columns] - fitted.mean) / fitted.scale
        coef = listwise_weights(standardised, labels[mine], paths[mine], c)
        return replace(fitted, kind_coef={**fitted.kind_coef, kind: coef})

    if rankable_paths(labels, paths) < MIN_OWN_PATHS:
        raise ConfigError(f"relevance model: weights of a path kind's own need {MIN_OWN_PATHS} paths with a relevant "
                          f"and an irrelevant candidate")
    held = _held_out(model, texts)
    folds = tuple(own(fold, held != i) for i, fold in enumerate(model.folds))
    fitted = calibrate_kind(replace(own(model, np.ones(len(rows), dtype=bool)), folds=folds), kind, rows, labels,
                            texts, paths)
    shared = sum(kind not in fold.kind_coef for fold in fitted.folds)
    counted = {k: n for k, n in fitted.meta.get("folds_with_shared_weights", {}).items() if k != kind} | (
        {kind: shared} if shared else {})  # this kind's count replaced: an earlier fit's or carry's is stale
    meta = {k: v for k, v in fitted.meta.items() if k != "folds_with_shared_weights"}
    return replace(fitted, meta={**meta, **({"folds_with_shared_weights": counted} if counted else {})})


def _check_kind_rows(kind: str, rows: np.ndarray, labels: np.ndarray, texts: Sequence[str]) -> None:
    """Rows of one known path kind, with both labels and one question text each (never quoted back)."""
    if kind not in PATH_KINDS or (path_kinds(rows) != kind).any():
        raise ConfigError("relevance model: the rows to fit or calibrate must all be paths of the named kind")
    if len(rows) == 0 or labels.min() == labels.max():
        raise ConfigError("relevance model: calibrating a path kind needs relevant and irrelevant candidates")
    if not len(texts) == len(labels) == len(rows):
        raise ConfigError("relevance model: one label and one question text per candidate row")


def _held_out(model: RelevanceModel, texts: Sequence[str]) -> np.ndarray:
    """Each row's fold (the one that holds its question out), or -1 for a question the model was not fitted on."""
    return np.array([model.fold_of.get(question_hash(text), -1) for text in texts])


def calibrate_kind(model: RelevanceModel, kind: str, rows: np.ndarray, labels: np.ndarray,
                   texts: Sequence[str], paths: np.ndarray) -> RelevanceModel:
    """The model (weights unchanged) calibrated for one more kind of path, from that kind's candidates (``texts``:
    each row's question as asked; ``paths``: each row's path). A fold model is calibrated only on the questions
    it was not made to hold out, so a training question's rows are still scored out-of-fold. Every other kind
    keeps its calibration."""
    _check_kind_rows(kind, rows, labels, texts)
    own = _kind_calibration(model, rows, labels, paths)
    if own is None:
        raise ConfigError("relevance model: on the named kind's paths the model does not rank relevant candidates "
                          "higher")
    held = _held_out(model, texts)
    folds = []
    for i, fold in enumerate(model.folds):  # a fold without both labels here, or whose logit does not rise
        mine = held != i                     # with relevance, borrows as-written's
        both = mine.any() and labels[mine].min() != labels[mine].max()
        fitted = _kind_calibration(fold, rows[mine], labels[mine], paths[mine]) if both else None
        calibration = {**fold.calibration, **({kind: fitted} if fitted is not None else {})}
        folds.append(replace(fold, calibration=calibration, kind_coef=_calibrated_only(fold.kind_coef, calibration)))
    return replace(model, calibration={**model.calibration, kind: own}, folds=tuple(folds))


def crossfit(rows: np.ndarray, labels: np.ndarray, row_groups: np.ndarray, group_texts: Mapping[str, Sequence[str]],
             paths: np.ndarray, meta: Mapping[str, Any], c: float = 1.0, features: Sequence[str] = FEATURES,
             folds: int = 5) -> RelevanceModel:
    """``fit`` on every row, plus one fold model per group fold (``GroupKFold``: a group — a question and
    its translations, or a whole article — is never on both sides) that scores the held-out groups'
    questions (``group_texts``: each group's question texts) from then on. A fold without both labels to
    fit on keeps the full model for its questions. ``paths``: each row's path (``fit``)."""

    def fitted(train: np.ndarray, model_meta: Mapping[str, Any]) -> RelevanceModel:
        return fit(rows[train], labels[train], paths[train], model_meta, c, features)

    full = fitted(np.arange(len(rows)), {**meta, "question_hashes": sorted({
        question_hash(t) for texts in group_texts.values() for t in texts})})
    names = np.unique(row_groups)
    if len(names) < 2:
        return full
    fold_models, fold_of = [], {}
    unfitted = 0
    for train, held in group_folds(row_groups, folds):
        try:
            model = fitted(train, {"name": f"fold {len(fold_models)}"})
        except ConfigError:  # nothing to rank or calibrate on this side: its questions keep the full model
            unfitted += 1
            continue
        fold_of.update({question_hash(t): len(fold_models) for group in np.unique(row_groups[held])
                        for t in group_texts.get(str(group), ())})
        fold_models.append(model)
    # a fold with too few copy paths of its own ranks them by the shared weights, which the full model may not
    shared = {kind: n for kind in full.kind_coef if (n := sum(kind not in m.kind_coef for m in fold_models))}
    meta_out = {**full.meta, "crossfit": {"folds": len(fold_models), "groups": int(len(names)),
                                          **({"folds_not_fitted": unfitted} if unfitted else {}),
                                          **({"folds_with_shared_weights": shared} if shared else {})}}
    return replace(full, meta=meta_out, folds=tuple(fold_models), fold_of=fold_of)


def carry_kind(source: RelevanceModel, target: RelevanceModel, kind: str) -> RelevanceModel:
    """``target`` with ``source``'s own weights and calibration for one path kind, re-expressed on ``target``'s
    standardisation so that the kind's logits differ from ``source``'s by a constant the calibration's offset takes
    back: its paths get exactly the probabilities ``source`` gives them (the calibration's other inputs — the softmax
    share of a path, which a constant does not move, and what is constant over a path — are the same features).
    For a refit of the shared weights that must keep a kind whose candidates are costly to make again (pivot copies:
    a model call per passage). The fold models keep ranking the kind by their shared weights, calibrated as
    as-written paths: ``source``'s folds held out other questions, so their weights would score a training
    question in-sample (counted in ``folds_with_shared_weights``)."""
    if kind not in source.kind_coef or kind not in source.calibration:
        raise ConfigError("relevance model: the model to carry a path kind from has no weights of its own for it")
    if (source.features, source.calibration_inputs, source.meta.get("embedder")) != (
            target.features, target.calibration_inputs, target.meta.get("embedder")):
        raise ConfigError("relevance model: a path kind's weights carry only to a model of the same features, "
                          "calibration inputs and embedder")
    raw = source.kind_coef[kind] / source.scale  # the kind's weight on each feature as computed
    shift = float((target.mean - source.mean) @ raw) + source.intercept - target.intercept  # source minus target
    slope, offset, *weights = source.calibration[kind]
    folds = tuple(replace(fold, kind_coef={k: v for k, v in fold.kind_coef.items() if k != kind},
                          calibration={k: v for k, v in fold.calibration.items() if k != kind})
                  for fold in target.folds)
    meta = {**target.meta, "folds_with_shared_weights": {**target.meta.get("folds_with_shared_weights", {}),
                                                         kind: len(folds)}} if folds else target.meta
    return replace(target, kind_coef={**target.kind_coef, kind: raw * target.scale},
                   calibration={**target.calibration, kind: (slope, offset + slope * shift, *weights)},
                   folds=folds, meta=meta)
