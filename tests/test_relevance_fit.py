"""Fitting the relevance model: weights that rank each path's candidates, and a calibration that makes them a
probability without reordering any path."""
from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.optimize import minimize

from babelrag.errors import ConfigError
from babelrag.relevance.features import FEATURES
from babelrag.relevance.listwise import listwise_weights
from babelrag.relevance.model import FIRST_CALIBRATION_INPUTS, RelevanceModel, default_model, fit


def _paths(rng: np.random.Generator, paths: int, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``paths`` paths of ``size`` candidates; gold is the best by ``2·dense_z − coverage`` plus noise, one per
    path, and every third path has none."""
    rows = np.zeros((paths * size, len(FEATURES)))
    rows[:, FEATURES.index("dense_z")] = rng.normal(size=paths * size)
    rows[:, FEATURES.index("coverage")] = rng.normal(size=paths * size)
    # per candidate, not per path: what the first release's calibration read
    rows[:, FEATURES.index("page_langs")] = np.log(rng.integers(1, 9, size=paths * size))
    rows[:, FEATURES.index("pool_size")] = np.repeat(np.log(rng.integers(10, 80, size=paths)), size)
    path = np.repeat(np.arange(paths), size)
    merit = 2 * rows[:, FEATURES.index("dense_z")] - rows[:, FEATURES.index("coverage")] + rng.gumbel(size=len(path))
    labels = np.zeros(len(path))
    for number in range(paths):
        if number % 3:
            mine = np.flatnonzero(path == number)
            labels[mine[np.argmax(merit[mine])]] = 1.0
    # the many-language pages are relevant more often: a per-candidate calibration input would reorder paths
    labels[(rows[:, FEATURES.index("page_langs")] > 1.5) & (rng.random(len(path)) < 0.05)] = 1.0
    return rows, labels, path


def test_the_listwise_weights_are_the_conditional_logit_optimum() -> None:
    """Against the same objective minimised without our gradient: a wrong gradient or a path left in that has
    no gold (it has no order to learn from) lands elsewhere."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(300, 3))
    paths = np.repeat(np.arange(30), 10)
    labels = np.zeros(300)
    for number in range(30):
        if number % 5:  # paths 0, 5, 10, … have no gold
            mine = np.flatnonzero(paths == number)
            labels[mine[np.argmax(x[mine] @ [1.5, -1.0, 0.0] + rng.gumbel(size=10))]] = 1.0

    def objective(w: np.ndarray) -> float:
        total = 0.0
        for number in range(30):
            mine = paths == number
            if labels[mine].any():
                scores = x[mine] @ w
                total -= np.log(np.exp(scores[labels[mine] > 0]).sum() / np.exp(scores).sum())
        return (total + 0.5 * w @ w / 2.0) / 24

    expected = minimize(objective, np.zeros(3), method="Nelder-Mead", options={"xatol": 1e-7, "fatol": 1e-10}).x
    found = listwise_weights(x, labels, paths, c=2.0)
    assert found == pytest.approx(expected, abs=2e-3)
    assert found[0] > 0.5 and found[1] < -0.3  # the order the labels were drawn from


def test_paths_without_both_kinds_of_candidate_cannot_be_fitted() -> None:
    with pytest.raises(ConfigError, match="relevant and an irrelevant"):
        listwise_weights(np.ones((4, 1)), np.array([1.0, 1.0, 0.0, 0.0]), np.array([0, 0, 1, 1]), c=1.0)


def test_the_calibration_never_reorders_a_path() -> None:
    """A probability per path kind from what is constant over a path: each path's order is the weights' own."""
    rng = np.random.default_rng(11)
    rows, labels, path = _paths(rng, 240, 25)
    model = fit(rows, labels, path, {}, features=("dense_z", "coverage", "page_langs"))
    assert set(model.calibration) == {"as_written"}
    probabilities, logits = model.predict(rows), model.logits(rows)
    for number in range(240):
        mine = path == number
        assert np.array_equal(np.argsort(-probabilities[mine], kind="stable"), np.argsort(-logits[mine], kind="stable"))


def test_the_calibration_is_a_probability_on_paths_it_never_saw() -> None:
    rng = np.random.default_rng(12)
    rows, labels, path = _paths(rng, 800, 25)
    seen = path < 400
    model = fit(rows[seen], labels[seen], path[seen], {}, features=("dense_z", "coverage"))
    predicted, observed = model.predict(rows[~seen]), labels[~seen]  # ranking weights alone average ~0.5
    assert predicted.mean() == pytest.approx(observed.mean(), rel=0.15) and observed.mean() < 0.1
    assert predicted[observed > 0].mean() > 1.5 * predicted[observed == 0].mean()


def test_every_calibration_input_is_constant_over_a_path() -> None:
    """What lets the calibration keep each path's order, checked on real feature rows of a varied path."""
    from babelrag.relevance.features import feature_matrix
    from babelrag.relevance.model import CALIBRATION_INPUTS
    from babelrag.types import Hit, Passage, SearchRequest

    rng = np.random.default_rng(2)
    hits = [Hit(Passage(f"p{i % 7}-{lang}", "text " * int(rng.integers(5, 60)), f"p{i % 7}", lang), 0.0, "p",
                frozenset({1, 2} if i % 4 else {3}), {"cosine": float(rng.random()), **(
                    {"bm25": float(rng.random() * 9), "bm25_rank": float(i)} if i % 3 else {})})
            for i, lang in enumerate(["de", "en", "zh", "ar", "sv", "en"] * 4)]
    rows = feature_matrix(hits, SearchRequest("q", "kb", "de"), frozenset({1, 2}))
    for name in CALIBRATION_INPUTS:
        assert len(set(rows[:, FEATURES.index(name)])) == 1, name
    for name in ("page_langs", "page_same_lang", "same_lang", "dense_lang_z"):  # per candidate: the path varies
        assert len(set(rows[:, FEATURES.index(name)])) > 1, name


def test_a_model_written_before_the_inputs_were_stored_keeps_its_first_calibration() -> None:
    shipped = default_model().to_dict()
    assert shipped["calibration_inputs"] == ["par_share", "same_lang_share", "mono_path", "pool_size"]
    rng = np.random.default_rng(4)
    rows, labels, path = _paths(rng, 200, 25)
    rows[:, FEATURES.index("par_share")] = rng.random(len(rows))  # the two inputs differ on every row
    first = fit(rows, labels, path, {}, features=("dense_z", "coverage"))
    first = RelevanceModel.from_dict({**first.to_dict(), "calibration_inputs": list(FIRST_CALIBRATION_INPUTS)})
    old = {key: value for key, value in first.to_dict().items() if key != "calibration_inputs"}
    reread = RelevanceModel.from_dict(json.loads(json.dumps(old)))
    assert reread.calibration_inputs == FIRST_CALIBRATION_INPUTS
    assert np.allclose(reread.predict(rows), first.predict(rows))
    assert not np.allclose(RelevanceModel.from_dict(first.to_dict() | {"calibration_inputs": list(
        shipped["calibration_inputs"])}).predict(rows), first.predict(rows))  # the inputs are what is read
    with pytest.raises(ConfigError, match="malformed"):
        RelevanceModel.from_dict({**shipped, "calibration_inputs": ["par_share"]})  # 4 weights, 1 input
