"""The learned relevance model: P(a candidate's page is relevant | its features), on one scale for every
path and language, so max-merging paths and thresholding mean the same thing everywhere.

Linear (predicting is one dot product: 50 candidates in well under a millisecond) and readable — the
report shows its weights. The weights are fitted to rank each path's candidates (``listwise.py``); a
probability comes from the calibration per path kind (``recalibrate``, ``calibration.py``), which reads the
logit, the candidate's softmax share of its path (both with weights that keep it rising) and what is constant
over a path, so it never reorders a path's candidates. The model travels as JSON with what it was fitted
on and for which embedder (a cosine from another model means something else: such a KB is refused, as a
mismatched index is).

A model fitted with ``crossfit`` also carries its *fold models*, each fitted without one group of
its training questions, and which fold held out each training question (by a hash of its text, every
translation of it included). A question it was fitted on is then scored by the fold model that never
saw it: evaluating a model on its own training questions, and calibrating a threshold on them, gives
the figures new questions would — never in-sample ones.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cache, cached_property
from importlib.metadata import version
from importlib.resources import files
from typing import Any

import numpy as np

from babelrag.errors import ConfigError, IndexMismatch
from babelrag.relevance.calibration import MIN_SLOPE, PATH_SOFTMAX, monotone_logistic, path_softmax
from babelrag.relevance.features import FEATURES, PIVOT_COPY
from babelrag.relevance.listwise import listwise_weights

FORMAT = 1
DEFAULT_FILE = "default_model.json"


@dataclass(frozen=True)
class RelevanceModel:
    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    meta: Mapping[str, Any] = field(default_factory=dict)
    folds: tuple[RelevanceModel, ...] = ()  # each fitted without one group of the training questions
    fold_of: Mapping[str, int] = field(default_factory=dict)  # training question hash → the fold held out
    # per path kind, (slope, offset, weight of each ``calibration_inputs`` input) turning the logit into a
    # probability that holds for every kind of path and every layout
    calibration: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    calibration_inputs: tuple[str, ...] = ()  # set in __post_init__: CALIBRATION_INPUTS

    def __post_init__(self) -> None:
        if not self.calibration_inputs:
            object.__setattr__(self, "calibration_inputs", CALIBRATION_INPUTS)

    def for_question(self, text: str | None) -> RelevanceModel:
        """The model to score this question with: the fold model that never saw it when it is one of the
        training questions, else the model itself."""
        fold = self.fold_of.get(question_hash(text)) if text is not None and self.folds else None
        return self if fold is None else self.folds[fold]

    def logits(self, rows: np.ndarray) -> np.ndarray:
        return ((rows[:, self._columns] - self.mean) / self.scale) @ self.coef + self.intercept

    def predict(self, rows: np.ndarray, paths: np.ndarray) -> np.ndarray:
        """P(relevant) for rows of all ``FEATURES`` (the model reads its own subset of them). ``paths``: each
        row's path (any ids): the calibration reads each candidate against the others of its path."""
        if len(paths) != len(rows):  # a caller's bug, whether or not this model is calibrated
            raise ValueError("relevance model: one path id per candidate row")
        if rows.shape[0] == 0:
            return np.zeros(0)
        logits = self.logits(rows)
        if self.calibration:
            kinds = _kind_numbers(rows)
            context = self.calibration_context(rows, logits, paths)
            fallback = self.calibration.get("as_written")
            for number in np.unique(kinds).tolist():  # numbers, not strings: this runs on every search
                if (own := self.calibration.get(PATH_KINDS[number], fallback)) is None:
                    continue
                slope, offset, *weights = own
                mine = kinds == number
                logits[mine] = slope * logits[mine] + offset + context[mine] @ np.asarray(weights)
        return 1.0 / (1.0 + np.exp(-logits))

    def calibration_context(self, rows: np.ndarray, logits: np.ndarray, paths: np.ndarray) -> np.ndarray:
        """The calibration's inputs besides the logit, one column per ``calibration_inputs``: features constant
        over a path, and the candidate's softmax share of its path (``calibration.py``)."""
        return np.column_stack([rows[:, column] if isinstance(column, int) else column(rows, logits, paths)
                                for column in self._calibration_columns])

    @cached_property
    def _columns(self) -> list[int]:  # read on every search: looked up once
        return [FEATURES.index(name) for name in self.features]

    @cached_property
    def _calibration_columns(self) -> list[int | Derived]:  # a feature's column, or how an input is computed
        return [DERIVED_INPUTS.get(name) or FEATURES.index(name) for name in self.calibration_inputs]

    @property
    def name(self) -> str:
        return str(self.meta.get("name", "learned"))

    def fits(self, embedder_fingerprint: str) -> bool:
        """Fitted on this embedder's cosines, and every feature computed by this version."""
        return self.meta.get("embedder") == embedder_fingerprint and not self._unknown_inputs()

    def check(self, embedder_fingerprint: str, kb: str) -> None:
        """Refuse a model fitted on another embedder's cosines, or for features this version does not compute."""
        fitted_for = self.meta.get("embedder")
        if fitted_for != embedder_fingerprint:
            raise IndexMismatch(kb, [("relevance model embedder", fitted_for, embedder_fingerprint)])
        if unknown := self._unknown_inputs():
            raise ConfigError(f"relevance model of knowledge base '{kb}': {len(unknown)} of the features or "
                              f"calibration inputs it reads are not computed by this version; refit it (`babelrag "
                              f"tune`) or install the version that wrote it")

    def _unknown_inputs(self) -> list[str]:
        """The features and calibration inputs this model reads that this version does not compute."""
        return [name for name in self.features if name not in FEATURES] + [
            name for name in self.calibration_inputs if name not in INPUTS]

    def fitted_on(self, texts: Sequence[str]) -> int:
        """How many of these questions the model was fitted on (by the hashes it keeps of its own)."""
        mine = set(self.meta.get("question_hashes") or ()) | set(self.fold_of)
        return sum(question_hash(text) in mine for text in texts)

    def scores_out_of_fold(self, texts: Sequence[str]) -> bool:
        """Whether every one of these questions it was fitted on is scored by a fold model that held it out."""
        return all(question_hash(text) in self.fold_of for text in texts
                   if question_hash(text) in set(self.meta.get("question_hashes") or ()))

    def weights(self) -> dict[str, float]:
        """Each feature's weight per standard deviation: what the model leans on."""
        return {name: round(float(w), 4) for name, w in zip(self.features, self.coef)}

    def to_dict(self) -> dict[str, Any]:
        out = {"format": FORMAT, "features": list(self.features), "mean": self.mean.tolist(),
               "scale": self.scale.tolist(), "coef": self.coef.tolist(), "intercept": self.intercept,
               "meta": dict(self.meta)}
        if self.calibration:
            out["calibration"] = {kind: list(pair) for kind, pair in self.calibration.items()}
        out["calibration_inputs"] = list(self.calibration_inputs)  # the folds' too
        if self.folds:
            out["folds"] = [{key: value for key, value in fold.to_dict().items()
                             if key in ("mean", "scale", "coef", "intercept", "calibration")} for fold in self.folds]
            out["fold_of"] = dict(sorted(self.fold_of.items()))
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RelevanceModel:
        """A model from its file's contents. Anything malformed — a missing field, weights of another length than
        the features or the calibration inputs, a number that is not finite — is refused here, naming the field,
        rather than turning into NaN probabilities or a failure on every search later."""
        try:
            if data.get("format") != FORMAT:
                raise ConfigError(f"relevance model: format {data.get('format')!r}, this version reads {FORMAT}")
            features = tuple(str(name) for name in data["features"])
            # a model written before the inputs were stored was calibrated on the first release's inputs
            stored = data.get("calibration_inputs")
            inputs = FIRST_CALIBRATION_INPUTS if stored is None else tuple(str(name) for name in stored)
            if not inputs or len(set(inputs)) != len(inputs) or len(set(features)) != len(features):
                raise _Malformed("features or calibration_inputs: empty or repeated names")
            folds = tuple(cls(features, *_weights(fold, len(features), f"folds[{i}]"), {"name": f"fold {i}"},
                              calibration=_calibration(fold, inputs, f"folds[{i}]"), calibration_inputs=inputs)
                          for i, fold in enumerate(data.get("folds") or ()))
            fold_of = {str(key): int(value) for key, value in (data.get("fold_of") or {}).items()}
            if any(not 0 <= value < len(folds) for value in fold_of.values()):
                raise _Malformed("fold_of names a fold the model does not have")
            return cls(features, *_weights(data, len(features), "model"), dict(data.get("meta") or {}), folds, fold_of,
                       _calibration(data, inputs, "model"), inputs)
        except _Malformed as error:  # our own words: the field, never its value
            raise ConfigError(f"relevance model: malformed ({error})") from error
        except KeyError as error:
            raise ConfigError(f"relevance model: malformed (missing field {error.args[0]!r})") from error
        except (TypeError, ValueError) as error:  # their messages may quote the file's values: not repeated
            raise ConfigError(f"relevance model: malformed ({type(error).__name__})") from error


class _Malformed(ValueError):
    """A model file that parses but does not describe a model (the message names the field)."""


def _calibration(data: Mapping[str, Any], inputs: Sequence[str], where: str) -> dict[str, tuple[float, ...]]:
    found = {str(kind): tuple(float(v) for v in values) for kind, values in (data.get("calibration") or {}).items()}
    if set(found) - set(PATH_KINDS) or any(len(v) != 2 + len(inputs) for v in found.values()):
        raise _Malformed(f"{where} calibration: unknown path kind or not one weight per calibration input")
    if not all(np.isfinite(v).all() for v in found.values()):
        raise _Malformed(f"{where} calibration: a weight that is not a finite number")
    return found


PATH_KINDS = ("as_written", "translated", "generated", "pivot_copies")
# besides the logit: the candidate's softmax share of its path (rises with the logit), and what else sets a
# candidate's base rate, constant over a path so the calibration keeps each path's order — how parallel the KB
# looks from it (a parallel KB has several relevant versions), its language mix, whether every candidate is in the
# path's language (a monolingual KB: its keywords are evidence), and how many candidates share one gold page
ONE_LANGUAGE = "one_language_path"
CALIBRATION_INPUTS = (PATH_SOFTMAX, "par_share", "same_lang_share", ONE_LANGUAGE, "pool_size")
# the release of commit 7bc5f1f read the logit and the path's context alone (measured on the shipped data's test
# articles, the as-written top hit predicted 0.35 where 0.70 was observed on the scattered layout), and ``mono_path``,
# also 1 on a path of fewer than ten candidates: a combination training never has, which gave the right top hit
# of a six-passage KB 0.04. Its models name their inputs in their file.
Derived = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]  # (rows, logits, paths) → one value per row
_SAME_LANG_SHARE = FEATURES.index("same_lang_share")
DERIVED_INPUTS: dict[str, Derived] = {
    PATH_SOFTMAX: lambda rows, logits, paths: path_softmax(logits, paths),
    ONE_LANGUAGE: lambda rows, logits, paths: (rows[:, _SAME_LANG_SHARE] >= 1.0).astype(float)}
INPUTS = frozenset((*FEATURES, *DERIVED_INPUTS))  # what a calibration may read
# the first release read each candidate's own page count, which reordered a path's candidates: on the shipped
# data's parallel country KBs, MRR@10 0.915 by the weights alone, 0.869 calibrated. Models written then keep it.
FIRST_CALIBRATION_INPUTS = ("page_langs", "same_lang_share", "mono_path", "pool_size")


_KIND_COLUMNS = {kind: FEATURES.index(name) for kind, name in
                 (("translated", "translated"), ("generated", "generated"), ("pivot_copies", PIVOT_COPY))}


def _kind_numbers(rows: np.ndarray) -> np.ndarray:
    """Each candidate's path kind as its index in ``PATH_KINDS``, read off its ``translated``, ``generated`` and
    ``pivot_copy`` features."""
    kinds = np.zeros(len(rows), dtype=np.intp)
    for kind, column in _KIND_COLUMNS.items():  # in this order: a later kind wins
        kinds[rows[:, column] > 0] = PATH_KINDS.index(kind)
    return kinds


def path_kinds(rows: np.ndarray) -> np.ndarray:
    """Each candidate's path kind, read off its ``translated``, ``generated`` and ``pivot_copy`` features."""
    return np.array(PATH_KINDS, dtype=object)[_kind_numbers(rows)]


def _weights(data: Mapping[str, Any], features: int, where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(mean, scale, coef, intercept): one of each per feature, every number finite, no scale of 0."""
    mean, scale, coef = (np.asarray(data[name], dtype=np.float64) for name in ("mean", "scale", "coef"))
    intercept = float(data["intercept"])
    if any(array.shape != (features,) for array in (mean, scale, coef)):
        raise _Malformed(f"{where} mean, scale, coef: not one number per feature")
    if not all(np.isfinite(numbers).all() for numbers in (mean, scale, coef, intercept)):
        raise _Malformed(f"{where} mean, scale, coef, intercept: a number that is not finite")
    if (scale == 0).any():
        raise _Malformed(f"{where} scale: a feature scaled by 0")
    return mean, scale, coef, intercept


def question_hash(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def fit(rows: np.ndarray, labels: np.ndarray, paths: np.ndarray, meta: Mapping[str, Any], c: float = 1.0,
        features: Sequence[str] = FEATURES) -> RelevanceModel:
    """Standardise ``features`` (rows hold all ``FEATURES``), fit the weights to rank each path's candidates
    (``listwise.py``; ``paths``: each row's path, ``c``: inverse regularisation strength) on every path but
    the pivot-copy ones (calibrated on, never fitted on: a copy is judged by its translator), then calibrate
    every kind of path on all the rows (``recalibrate``)."""
    if len(rows) == 0 or labels.min() == labels.max():
        raise ConfigError("relevance model: the training candidates need both relevant and irrelevant passages")
    chosen = rows[:, [FEATURES.index(name) for name in features]]
    mean, scale = chosen.mean(axis=0), chosen.std(axis=0)
    scale[scale == 0] = 1.0
    own = rows[:, FEATURES.index(PIVOT_COPY)] == 0
    coef = listwise_weights((chosen[own] - mean) / scale, labels[own], paths[own], c)
    model = RelevanceModel(tuple(features), mean, scale, coef, 0.0,
                           {**meta, "candidates": int(len(rows)), "relevant": int(labels.sum()), "C": c,
                            "objective": "listwise (conditional logit per path)",
                            "fitted_at": datetime.now(UTC).isoformat(timespec="seconds"),
                            "scikit-learn": version("scikit-learn")})
    return recalibrate(model, rows, labels, paths)


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
    with relevance, borrows the as-written calibration."""
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
    return replace(model, calibration=calibration)


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
    except ValueError as error:  # the fit's own words: no input in them
        raise ConfigError(f"relevance model: {error}") from error
    if not np.isfinite([slope, offset, *weights]).all():
        raise ConfigError("relevance model: the calibration did not converge to finite weights")
    if slope * logits.std() <= MIN_SLOPE * (1 + 1e-6):
        return None
    return (slope, offset, *weights)


def calibrate_kind(model: RelevanceModel, kind: str, rows: np.ndarray, labels: np.ndarray,
                   texts: Sequence[str], paths: np.ndarray) -> RelevanceModel:
    """The model (weights unchanged) calibrated for one more kind of path, from that kind's candidates (``texts``:
    each row's question as asked; ``paths``: each row's path). A fold model is calibrated only on the questions
    it was not made to hold out, so a training question's rows are still scored out-of-fold. Every other kind
    keeps its calibration."""
    if kind not in PATH_KINDS or (path_kinds(rows) != kind).any():
        raise ConfigError(f"relevance model: rows to calibrate must all be {kind!r} paths")
    if len(rows) == 0 or labels.min() == labels.max():
        raise ConfigError("relevance model: calibrating a path kind needs relevant and irrelevant candidates")
    own = _kind_calibration(model, rows, labels, paths)
    if own is None:
        raise ConfigError(f"relevance model: on {kind!r} paths the model does not rank relevant candidates higher")
    held = np.array([model.fold_of.get(question_hash(text), -1) for text in texts])
    folds = []
    for i, fold in enumerate(model.folds):  # a fold without both labels here, or whose logit does not rise
        mine = held != i                     # with relevance, borrows as-written's
        both = mine.any() and labels[mine].min() != labels[mine].max()
        fitted = _kind_calibration(fold, rows[mine], labels[mine], paths[mine]) if both else None
        own_kind = {kind: fitted} if fitted is not None else {}
        folds.append(replace(fold, calibration={**fold.calibration, **own_kind}))
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
    meta_out = {**full.meta, "crossfit": {"folds": len(fold_models), "groups": int(len(names)),
                                          **({"folds_not_fitted": unfitted} if unfitted else {})}}
    return replace(full, meta=meta_out, folds=tuple(fold_models), fold_of=fold_of)


@cache
def default_model() -> RelevanceModel:
    """The model shipped in the package, fitted on the shipped dev questions (see its ``meta``)."""
    return RelevanceModel.from_dict(json.loads(
        files("babelrag.relevance").joinpath(DEFAULT_FILE).read_text(encoding="utf-8")))


def model_for(stored_profile: Mapping[str, Any] | None, profile_model: Mapping[str, Any] | None = None) -> RelevanceModel:
    """A profile file's model, else the one ``babelrag tune`` stored with the KB (in its manifest's
    profile), else the shipped default."""
    own = profile_model or (stored_profile or {}).get("model")
    return RelevanceModel.from_dict(own) if own else default_model()


def describe(model: RelevanceModel, extra: Sequence[str] = ()) -> dict[str, Any]:
    """What the manifest and the trace say about a model (not its weights), and which path kinds have no
    calibration of their own and are scored on the question's own (as-written) scale."""
    keys = ("name", "trained_on", "questions", "candidates", "embedder", "fitted_at", "scikit-learn", *extra)
    borrowed = [kind for kind in PATH_KINDS if kind != "as_written" and kind not in model.calibration]
    return {**{k: model.meta[k] for k in keys if k in model.meta},
            **({"calibration_borrowed_from_as_written": borrowed} if model.calibration and borrowed else {})}
