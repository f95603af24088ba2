"""The learned relevance model: P(a candidate's page is relevant | its features), on one scale for every
path and language, so max-merging paths and thresholding mean the same thing everywhere.

Linear (predicting is one dot product: 50 candidates in well under a millisecond) and readable — the
report shows its weights. The weights are fitted to rank each path's candidates (``listwise.py``); a path over the
KB's pivot-language copies is ranked by weights of its own (``kind_coef``: what a copy's features say depends on
its translator, and the question's own paths' weights ranked the copies worse than their plain cosine); a
probability comes from the calibration per path kind (``learn.py: recalibrate``, ``calibration.py``), which reads the
logit, the candidate's softmax share of its path (both with weights that keep it rising) and what is constant
over a path, so it never reorders a path's candidates. The model travels as JSON with what it was fitted
on and for which embedder (a cosine from another model means something else: such a KB is refused, as a
mismatched index is).

A model fitted with ``learn.py: crossfit`` also carries its *fold models*, each fitted without one group of
its training questions, and which fold held out each training question (by a hash of its text, every
translation of it included). A question it was fitted on is then scored by the fold model that never
saw it: evaluating a model on its own training questions, and calibrating a threshold on them, gives
the figures new questions would — never in-sample ones.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from importlib.resources import files
from typing import Any

import numpy as np

from babelrag.errors import ConfigError, IndexMismatch
from babelrag.relevance.calibration import PATH_SOFTMAX, path_softmax
from babelrag.relevance.features import FEATURES, PIVOT_COPY

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
    # per path kind ranked by weights of its own (on the same standardised features; ``learn.py``), those
    # weights; every other kind is ranked by ``coef``
    kind_coef: Mapping[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.calibration_inputs:
            object.__setattr__(self, "calibration_inputs", CALIBRATION_INPUTS)

    def for_question(self, text: str | None) -> RelevanceModel:
        """The model to score this question with: the fold model that never saw it when it is one of the
        training questions, else the model itself."""
        fold = self.fold_of.get(question_hash(text)) if text is not None and self.folds else None
        return self if fold is None else self.folds[fold]

    def logits(self, rows: np.ndarray, kinds: np.ndarray | None = None) -> np.ndarray:
        """Each row's ranking score: its path kind's own weights (``kind_coef``) or the shared ones. ``kinds``: each
        row's ``_kind_numbers``, when the caller has them."""
        standardised = (rows[:, self._columns] - self.mean) / self.scale
        logits = standardised @ self.coef + self.intercept
        if self.kind_coef:
            kinds = _kind_numbers(rows) if kinds is None else kinds
            for kind, coef in self.kind_coef.items():
                mine = kinds == PATH_KINDS.index(kind)
                if mine.any():
                    logits[mine] = standardised[mine] @ coef + self.intercept
        return logits

    def predict(self, rows: np.ndarray, paths: np.ndarray) -> np.ndarray:
        """P(relevant) for rows of all ``FEATURES`` (the model reads its own subset of them). ``paths``: each
        row's path (any ids): the calibration reads each candidate against the others of its path."""
        if len(paths) != len(rows):  # a caller's bug, whether or not this model is calibrated
            raise ValueError("relevance model: one path id per candidate row")
        if rows.shape[0] == 0:
            return np.zeros(0)
        kinds = _kind_numbers(rows) if self.calibration or self.kind_coef else None
        logits = self.logits(rows, kinds)
        if self.calibration:
            context = self.calibration_context(rows, logits, paths)
            fallback = self.calibration.get("as_written")
            for number in np.unique(kinds).tolist():  # numbers, not strings: this runs on every search
                if (own := self.calibration.get(PATH_KINDS[number], fallback)) is None:
                    continue
                slope, offset, *weights = own
                mine = kinds == number
                logits[mine] = slope * logits[mine] + offset + context[mine] @ np.asarray(weights)
        return sigmoid(logits)

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
        return [name for name in self.features if name not in COMPUTED] + [
            name for name in self.calibration_inputs if name not in INPUTS]

    def fitted_on(self, texts: Sequence[str]) -> int:
        """How many of these questions the model was fitted on (by the hashes it keeps of its own)."""
        mine = set(self.meta.get("question_hashes") or ()) | set(self.fold_of)
        return sum(question_hash(text) in mine for text in texts)

    def scores_out_of_fold(self, texts: Sequence[str]) -> bool:
        """Whether every one of these questions it was fitted on is scored by a fold model that held it out."""
        return all(question_hash(text) in self.fold_of for text in texts
                   if question_hash(text) in set(self.meta.get("question_hashes") or ()))

    def weights(self, kind: str | None = None) -> dict[str, float]:
        """Each feature's weight per standard deviation: what the model leans on (``kind``: a path kind's own)."""
        coef = self.kind_coef[kind] if kind is not None else self.coef
        return {name: round(float(w), 4) for name, w in zip(self.features, coef)}

    def to_dict(self) -> dict[str, Any]:
        out = {"format": FORMAT, "features": list(self.features), "mean": self.mean.tolist(),
               "scale": self.scale.tolist(), "coef": self.coef.tolist(), "intercept": self.intercept,
               "meta": dict(self.meta)}
        if self.calibration:
            out["calibration"] = {kind: list(pair) for kind, pair in self.calibration.items()}
        out["calibration_inputs"] = list(self.calibration_inputs)  # the folds' too
        if self.kind_coef:
            out["kind_coef"] = {kind: coef.tolist() for kind, coef in self.kind_coef.items()}
        if self.folds:
            out["folds"] = [{key: value for key, value in fold.to_dict().items()
                             if key in ("mean", "scale", "coef", "intercept", "calibration", "kind_coef")}
                            for fold in self.folds]
            out["fold_of"] = dict(sorted(self.fold_of.items()))
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RelevanceModel:
        """A model from its file's contents. Anything malformed — a missing field, weights of another length than
        the features or the calibration inputs, a number that is not finite, an unknown path kind — is refused here,
        naming the field, rather than turning into NaN probabilities or a failure on every search later."""
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
                              calibration=_calibration(fold, inputs, f"folds[{i}]"), calibration_inputs=inputs,
                              kind_coef=_kind_coef(fold, len(features), f"folds[{i}]"))
                          for i, fold in enumerate(data.get("folds") or ()))
            fold_of = {str(key): int(value) for key, value in (data.get("fold_of") or {}).items()}
            if any(not 0 <= value < len(folds) for value in fold_of.values()):
                raise _Malformed("fold_of names a fold the model does not have")
            return cls(features, *_weights(data, len(features), "model"), dict(data.get("meta") or {}), folds, fold_of,
                       _calibration(data, inputs, "model"), inputs, _kind_coef(data, len(features), "model"))
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


def _kind_coef(data: Mapping[str, Any], features: int, where: str) -> dict[str, np.ndarray]:
    stored = data.get("kind_coef") or {}
    if not isinstance(stored, Mapping):
        raise _Malformed(f"{where} kind_coef: not a mapping of path kinds to weights")
    found = {str(kind): np.asarray(coef, dtype=np.float64) for kind, coef in stored.items()}
    if set(found) - set(PATH_KINDS) or any(coef.shape != (features,) for coef in found.values()):
        raise _Malformed(f"{where} kind_coef: unknown path kind or not one weight per feature")
    if not all(np.isfinite(coef).all() for coef in found.values()):
        raise _Malformed(f"{where} kind_coef: a weight that is not a finite number")
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
COMPUTED = frozenset(FEATURES)  # checked by every ``Searcher`` (the service builds one a request): a set, not a scan
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


def sigmoid(logits: np.ndarray) -> np.ndarray:
    """1 / (1 + e^-x) without overflowing for a very negative logit (a far-off candidate: probability 0, and no
    RuntimeWarning on the user's console)."""
    return np.exp(-np.logaddexp(0.0, -logits))


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
    """What the manifest and the trace say about a model (not its weights), which path kinds have no calibration of
    their own and are scored on the question's own (as-written) scale, and which are ranked by weights of their
    own."""
    keys = ("name", "trained_on", "questions", "candidates", "embedder", "fitted_at", "scikit-learn", *extra)
    borrowed = [kind for kind in PATH_KINDS if kind != "as_written" and kind not in model.calibration]
    return {**{k: model.meta[k] for k in keys if k in model.meta},
            **({"calibration_borrowed_from_as_written": borrowed} if model.calibration and borrowed else {}),
            **({"ranked_by_own_weights": sorted(model.kind_coef)} if model.kind_coef else {})}
