"""Fitting the relevance model: weights that rank each path's candidates, and a calibration that makes them a
probability without reordering any path."""
from __future__ import annotations

import json
import re
from dataclasses import replace

import numpy as np
import pytest
from scipy.optimize import minimize

from babelrag.errors import ConfigError
from babelrag.relevance import calibration
from babelrag.relevance.calibration import PATH_SOFTMAX, monotone_logistic, path_softmax
from babelrag.relevance.features import FEATURES
from babelrag.relevance.listwise import listwise_weights
from babelrag.relevance.learn import fit, recalibrate
from babelrag.relevance.model import FIRST_CALIBRATION_INPUTS, RelevanceModel, default_model


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


def test_weights_shrunk_toward_another_models_are_that_objective_optimum_and_keep_its_order_when_held_tight() -> None:
    """``anchor``: the penalty is the distance to the anchor's weights, not to zero (checked against the objective
    minimised without our gradient), and a fit held tight to another model (its weights re-expressed on this fit's
    standardisation) ranks every candidate as that model does: the two logits differ by one constant."""
    rng = np.random.default_rng(8)
    x = rng.normal(size=(200, 2))
    paths = np.repeat(np.arange(20), 10)
    labels = np.zeros(200)
    for number in range(20):
        mine = np.flatnonzero(paths == number)
        labels[mine[np.argmax(x[mine] @ [1.0, 0.5] + rng.gumbel(size=10))]] = 1.0
    anchor = np.array([-1.0, 2.0])

    def objective(w: np.ndarray) -> float:
        total = sum(-np.log(np.exp(x[paths == n] @ w)[labels[paths == n] > 0].sum() / np.exp(x[paths == n] @ w).sum())
                    for n in range(20))
        return (total + 0.5 * (w - anchor) @ (w - anchor) / 0.5) / 20

    expected = minimize(objective, np.zeros(2), method="Nelder-Mead", options={"xatol": 1e-7, "fatol": 1e-10}).x
    assert listwise_weights(x, labels, paths, c=0.5, anchor=anchor) == pytest.approx(expected, abs=2e-3)
    rows, labels, path = _paths(np.random.default_rng(9), 200, 8)
    features = ("dense_z", "coverage")
    other = fit(*_paths(np.random.default_rng(10), 200, 8), {"name": "other"}, features=features)
    other = replace(other, coef=np.array([0.2, -1.5]))  # mostly coverage: not the order the rows were drawn from
    held = fit(rows, labels, path, {}, c=1e-6, features=features, anchor=other)
    assert np.ptp(held.logits(rows) - other.logits(rows)) < 5e-3 and held.meta["anchored_on"] == "other"
    free = fit(rows, labels, path, {}, features=features)
    assert np.ptp(free.logits(rows) - other.logits(rows)) > 1.0  # unanchored, the rows' own order
    with pytest.raises(ConfigError, match="same features"):
        fit(rows, labels, path, {}, features=("dense_z",), anchor=other)


def test_paths_without_both_kinds_of_candidate_cannot_be_fitted() -> None:
    with pytest.raises(ConfigError, match="relevant and an irrelevant"):
        listwise_weights(np.ones((4, 1)), np.array([1.0, 1.0, 0.0, 0.0]), np.array([0, 0, 1, 1]), c=1.0)


def test_the_calibration_never_reorders_a_path() -> None:
    """A probability per path kind from what is constant over a path: each path's order is the weights' own."""
    rng = np.random.default_rng(11)
    rows, labels, path = _paths(rng, 240, 25)
    model = fit(rows, labels, path, {}, features=("dense_z", "coverage", "page_langs"))
    assert set(model.calibration) == {"as_written"}
    probabilities, logits = model.predict(rows, path), model.logits(rows)
    for number in range(240):
        mine = path == number
        assert np.array_equal(np.argsort(-probabilities[mine], kind="stable"), np.argsort(-logits[mine], kind="stable"))


def test_the_calibration_is_a_probability_on_paths_it_never_saw() -> None:
    rng = np.random.default_rng(12)
    rows, labels, path = _paths(rng, 800, 25)
    seen = path < 400
    model = fit(rows[seen], labels[seen], path[seen], {}, features=("dense_z", "coverage"))
    predicted, observed = model.predict(rows[~seen], path[~seen]), labels[~seen]  # ranking weights alone average ~0.5
    assert predicted.mean() == pytest.approx(observed.mean(), rel=0.15) and observed.mean() < 0.1
    assert predicted[observed > 0].mean() > 1.5 * predicted[observed == 0].mean()


def test_every_calibration_input_is_constant_over_a_path() -> None:
    """What lets the calibration keep each path's order, checked on real feature rows of a varied path."""
    from babelrag.relevance.features import feature_matrix
    from babelrag.relevance.model import CALIBRATION_INPUTS
    from babelrag.types import Hit, Passage, SearchRequest

    rng = np.random.default_rng(2)
    hits = [Hit(Passage(f"p{i % 7}-{lang}", "text " * int(rng.integers(5, 60)), f"p{i % 7}", lang), 0.0, "p",
                frozenset({1, 2} if i % 4 else {3}), {"cosine": float(rng.random()), "centered": float(rng.random()), **(
                    {"bm25": float(rng.random() * 9), "bm25_rank": float(i)} if i % 3 else {})})
            for i, lang in enumerate(["de", "en", "zh", "ar", "sv", "en"] * 4)]
    rows = feature_matrix(hits, SearchRequest("q", "kb", "de"), frozenset({1, 2}))
    model = replace(default_model(), calibration_inputs=CALIBRATION_INPUTS)
    context = model.calibration_context(rows, model.logits(rows), np.zeros(len(rows)))
    for name, column in zip(CALIBRATION_INPUTS, context.T, strict=True):
        if name != PATH_SOFTMAX:  # computed from the logits, rising with them (tested on its own)
            assert len(set(column)) == 1, name
    for name in ("page_langs", "page_same_lang", "same_lang", "dense_lang_z"):  # per candidate: the path varies
        assert len(set(rows[:, FEATURES.index(name)])) > 1, name


def test_a_model_written_before_the_inputs_were_stored_keeps_its_first_calibration() -> None:
    rng = np.random.default_rng(4)
    rows, labels, path = _paths(rng, 200, 25)
    rows[:, FEATURES.index("par_share")] = rng.random(len(rows))  # the two inputs differ on every row
    fitted = fit(rows, labels, path, {}, features=("dense_z", "coverage"))
    first = recalibrate(replace(fitted, calibration_inputs=FIRST_CALIBRATION_INPUTS), rows, labels, path)
    old = {key: value for key, value in first.to_dict().items() if key != "calibration_inputs"}
    reread = RelevanceModel.from_dict(json.loads(json.dumps(old)))
    assert reread.calibration_inputs == FIRST_CALIBRATION_INPUTS
    assert np.allclose(reread.predict(rows, path), first.predict(rows, path))
    second_release = ["par_share", "same_lang_share", "mono_path", "pool_size"]  # written with the file
    assert not np.allclose(RelevanceModel.from_dict(first.to_dict() | {"calibration_inputs": second_release}).predict(
        rows, path), first.predict(rows, path))  # the inputs are what is read
    shipped = default_model().to_dict()
    with pytest.raises(ConfigError, match="malformed"):
        RelevanceModel.from_dict({**shipped, "calibration_inputs": ["par_share"]})  # 5 weights, 1 input


def test_the_path_softmax_is_each_candidates_share_of_its_path() -> None:
    logits = np.array([900.0, 899.0, 0.5, -3.0, 2.0, 2.0, 7.0])
    paths = np.array(["b", "b", "a", "a", "c", "c", "d"])  # any ids, in any order
    shares = path_softmax(logits, paths)
    assert np.isfinite(shares).all()  # no overflow on far-off logits
    for path in set(paths):
        mine = paths == path
        assert shares[mine].sum() == pytest.approx(1.0)
    assert shares[0] == pytest.approx(1 / (1 + np.exp(-1.0))) and shares[4] == shares[5] == 0.5 and shares[6] == 1.0
    shifted = path_softmax(logits + np.where(paths == "a", 40.0, 0.0), paths)
    assert shifted == pytest.approx(shares)  # a path's own offset cancels out


def test_the_monotone_calibration_is_the_logistic_fit_unless_a_weight_would_fall_below_zero() -> None:
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(8)
    inputs = rng.normal(size=(3000, 3))
    labels = (rng.random(3000) < 1 / (1 + np.exp(-(1.5 * inputs[:, 0] - 0.8 * inputs[:, 1] - 1.0)))).astype(float)
    free = LogisticRegression(C=1e4, max_iter=2000).fit(inputs, labels)
    bounded = monotone_logistic(inputs, labels, increasing=[0])
    assert bounded == pytest.approx([*free.coef_[0], free.intercept_[0]], abs=1e-3)  # the bound is not reached
    bounded = monotone_logistic(inputs, labels, increasing=[0, 1])  # column 1 lowers the odds: held at 0
    assert bounded[1] == pytest.approx(0.0, abs=1e-8) and bounded[0] > 1.0
    with pytest.raises(ValueError, match="relevant and irrelevant"):
        monotone_logistic(inputs, np.zeros(3000), increasing=[0])


def test_a_share_that_lowers_the_odds_gets_no_weight_so_no_path_is_reordered() -> None:
    """Relevance falling with the softmax share at a given logit (a calibration fitted freely would weigh the share
    negatively, and reorder a path where two candidates share its mass): the fit holds the share's weight at 0."""
    from babelrag.relevance.learn import _kind_calibration

    rng = np.random.default_rng(9)
    rows, _, path = _paths(rng, 400, 8)
    model = replace(fit(*_paths(np.random.default_rng(1), 100, 8), {}, features=("dense_z",)), calibration={})
    logits = model.logits(rows)
    share = path_softmax(logits, path)
    labels = (rng.random(len(rows)) < 1 / (1 + np.exp(-(logits - 12 * share)))).astype(float)
    fitted = _kind_calibration(model, rows, labels, path)
    assert fitted is not None and fitted[2] == pytest.approx(0.0, abs=1e-8)  # the share's weight
    calibrated = replace(model, calibration={"as_written": fitted})
    probabilities = calibrated.predict(rows, path)
    for number in range(400):
        mine = path == number
        assert np.array_equal(np.argsort(-probabilities[mine], kind="stable"), np.argsort(-logits[mine], kind="stable"))


def test_a_paths_top_hit_is_as_likely_as_predicted_on_small_and_large_pools() -> None:
    """The probability a user reads first. Gold is drawn as the best of a path's candidates by merit plus Gumbel
    noise, so the chance a candidate is gold is its softmax share: on a handful of candidates the top hit is
    gold far more often than in a pool of 80. A calibration of the logit and the pool's size alone misses both
    (measured: top hits of 4–7 candidates predicted 0.43, observed 0.62; of 40–80, 0.21 against 0.34)."""
    rng = np.random.default_rng(21)
    sizes = rng.choice([4, 5, 6, 7, 40, 60, 80], size=1200)
    path = np.repeat(np.arange(len(sizes)), sizes)
    rows = np.zeros((len(path), len(FEATURES)))
    noise = rng.normal(size=len(path))
    rows[:, FEATURES.index("dense_z")] = noise * np.repeat(rng.uniform(0.5, 2.5, len(sizes)), sizes)  # spread per path
    rows[:, FEATURES.index("pool_size")] = np.log(sizes[path])
    merit = 1.5 * rows[:, FEATURES.index("dense_z")] + rng.gumbel(size=len(path))
    labels = np.zeros(len(path))
    for number in range(len(sizes)):
        mine = np.flatnonzero(path == number)
        labels[mine[np.argmax(merit[mine])]] = 1.0
    seen = path < 600
    model = fit(rows[seen], labels[seen], path[seen], {}, features=("dense_z",))
    held, held_path, held_labels = rows[~seen], path[~seen], labels[~seen]
    predicted = model.predict(held, held_path)
    keys = np.lexsort((-predicted, held_path))
    top = keys[np.r_[True, held_path[keys][1:] != held_path[keys][:-1]]]
    small = sizes[held_path[top]] < 10
    for pools in (small, ~small):
        assert predicted[top][pools].mean() == pytest.approx(held_labels[top][pools].mean(), abs=0.06)


def test_on_a_six_passage_kb_the_right_top_hit_reads_as_likely(tmp_path) -> None:  # noqa: ANN001
    """The shipped model on a KB far smaller than the pools it was fitted on (one XQuAD article, two paragraphs,
    in German, English and Turkish; real embedder and engine): each question's top hit is a version of its page,
    and the probability says so. Calibrated on the logit and the path's context alone, the first question's top hit
    got 0.0003; with the path softmax but ``mono_path`` for an input (1 on a path under ten candidates), 0.04."""
    from conftest import small_squad

    from babelrag.config import make_config
    from babelrag.ingest.pipeline import index_sources
    from babelrag.kb import KnowledgeBase
    from babelrag.retrieve.pipeline import Searcher
    from babelrag.types import Question

    files = small_squad(tmp_path / "data", articles=1, paragraphs=2, langs=("de", "en", "tr"))
    index_sources("tiny", [str(f) for f in files], str(tmp_path / "store"))
    questions = [("Wie viele Punkte gab die Verteidigung der Panthers ab?", "de", 0),
                 ("How many points did the Panthers defense surrender?", "en", 0),
                 ("Broncos'a bölge turunda kim kaybetmiştir?", "tr", 1),
                 ("Who lost to the Broncos in the divisional round?", "en", 1)]
    with KnowledgeBase.open("tiny", str(tmp_path / "store")) as kb:
        searcher = Searcher(kb, make_config({"rerank": "learned", "threshold": None}))
        for text, lang, paragraph in questions:
            top, *rest = searcher.search(Question(text, lang=lang)).evidence.hits
            assert top.passage.doc_id.endswith(f"#{paragraph}") and top.score > 0.9  # measured 0.998 each
            # the other paragraph, each of its versions sharing the path with the top hit, stays unlikely (≤ 0.19)
            assert all(hit.score < 0.3 for hit in rest if not hit.passage.doc_id.endswith(f"#{paragraph}"))


def test_a_model_file_of_the_previous_release_predicts_what_that_release_did() -> None:
    """The shipped model of commit 7bc5f1f (its fold models left out), with the predictions that release's own code
    made for these rows, once with its calibration inputs as stored and once with none named (a file older still):
    this version must read both the same way, whatever paths the rows are given."""
    from pathlib import Path

    path = Path(__file__).parent / "fixtures" / "previous_release_model.json"
    fixture = json.loads(path.read_text(encoding="utf-8"))
    stored = np.asarray(fixture["rows"])  # in that release's feature order: each column put where this one keeps it
    rows = np.zeros((len(stored), len(FEATURES)))
    rows[:, [FEATURES.index(name) for name in fixture["row_features"]]] = stored
    for variant, data in (("stored", fixture["model"]),
                          ("unnamed", {k: v for k, v in fixture["model"].items() if k != "calibration_inputs"})):
        model = RelevanceModel.from_dict(data)
        for paths in (np.zeros(len(rows)), np.arange(len(rows))):
            assert model.predict(rows, paths) == pytest.approx(fixture["expected"][variant], rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("change, field", [
    (lambda m: m | {"coef": [*m["coef"][:-1], float("nan")]}, "model mean, scale, coef, intercept"),
    (lambda m: m | {"coef": m["coef"][:-1]}, "model mean, scale, coef: not one number per feature"),
    (lambda m: m | {"scale": [0.0, *m["scale"][1:]]}, "model scale"),
    (lambda m: m | {"intercept": float("inf")}, "model mean, scale, coef, intercept"),
    (lambda m: m | {"calibration": {**m["calibration"], "as_written": [float("nan")] * 7}}, "model calibration"),
    (lambda m: m | {"folds": [m["folds"][0] | {"mean": [float("inf")] * len(m["mean"])}, *m["folds"][1:]]},
     "folds[0] mean"),
    (lambda m: m | {"folds": [m["folds"][0] | {"calibration": {"as_written": [1.0, 2.0]}}, *m["folds"][1:]]},
     "folds[0] calibration"),
    (lambda m: m | {"kind_coef": {"pivot_copies": m["kind_coef"]["pivot_copies"][:-1]}}, "model kind_coef"),
    (lambda m: m | {"kind_coef": {"pivot_copies": [float("nan")] * len(m["coef"])}}, "model kind_coef"),
    (lambda m: m | {"kind_coef": {"copies": m["kind_coef"]["pivot_copies"]}}, "model kind_coef: unknown path kind"),
    (lambda m: m | {"folds": [m["folds"][0] | {"kind_coef": {"pivot_copies": [1.0]}}, *m["folds"][1:]]},
     "folds[0] kind_coef"),
    (lambda m: m | {"kind_coef": [1.0, 2.0]}, "model kind_coef: not a mapping"),
    (lambda m: m | {"calibration_inputs": []}, "calibration_inputs: empty"),
    (lambda m: m | {"calibration_inputs": ["pool_size"] * 5}, "repeated names"),
    (lambda m: {key: value for key, value in m.items() if key != "coef"}, "missing field 'coef'"),
])
def test_a_malformed_model_file_is_refused_naming_the_field(change, field: str) -> None:
    """Refused when read, not turned into NaN probabilities (a NaN calibration weight) or a failure on every search
    (a NaN weight): the message names the field."""
    shipped = default_model().to_dict()
    with pytest.raises(ConfigError, match=re.escape(field)):
        RelevanceModel.from_dict(change(json.loads(json.dumps(shipped))))


def test_a_malformed_model_file_is_not_quoted_back() -> None:
    shipped = default_model().to_dict()
    with pytest.raises(ConfigError) as refused:
        RelevanceModel.from_dict(shipped | {"intercept": "<script>secret</script>"})
    assert "secret" not in str(refused.value) and "ValueError" in str(refused.value)


def test_a_model_reading_features_this_version_does_not_compute_is_refused_not_skipped() -> None:
    """``rerank: auto`` skips a model fitted on another embedder (its cosines mean something else), but a model
    of this embedder written by a version with other features is refused with what to do, not silently dropped."""
    shipped = default_model()
    newer = replace(shipped, calibration_inputs=(*shipped.calibration_inputs[:-1], "a_future_input"))
    assert not newer.fits(shipped.meta["embedder"])
    with pytest.raises(ConfigError, match="not computed by this version; refit it") as refused:
        newer.check(shipped.meta["embedder"], "kb")
    assert "a_future_input" not in str(refused.value)


def test_a_calibration_stopped_by_its_iteration_budget_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Weights the optimiser did not reach an optimum with are never used as if fitted (the shipped data's fits
    converge in under 20 iterations)."""
    rng = np.random.default_rng(5)
    rows, labels, path = _paths(rng, 100, 25)
    fitted = fit(rows, labels, path, {}, features=("dense_z", "coverage"))
    inputs = np.column_stack([fitted.logits(rows), path_softmax(fitted.logits(rows), path)])
    monotone_logistic(inputs, labels, [0, 1])  # converges within the budget
    monkeypatch.setattr(calibration, "MAX_ITERATIONS", 1)
    with pytest.raises(ValueError, match="did not converge in 1 iterations"):
        monotone_logistic(inputs, labels, [0, 1])
    with pytest.raises(ConfigError, match="relevance model: calibration: the fit did not converge"):
        recalibrate(fitted, rows, labels, path)


def test_ranking_weights_stopped_by_their_iteration_budget_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from babelrag.relevance import listwise

    rng = np.random.default_rng(5)
    rows, labels, path = _paths(rng, 100, 25)
    listwise_weights(rows, labels, path, c=1.0)  # converges within the budget
    monkeypatch.setattr(listwise, "MAX_ITERATIONS", 1)
    with pytest.raises(ConfigError, match="ranking fit did not converge in 1 iterations"):
        listwise_weights(rows, labels, path, c=1.0)



def test_what_a_model_says_about_itself_names_the_path_kinds_on_the_question_s_scale() -> None:
    """A path kind without a calibration of its own is scored as the question's own paths are: said in the
    manifest and the profile, not left to be found out."""
    from babelrag.relevance.model import describe

    shipped = default_model()  # calibrated for every path kind, the pivot copies included
    assert "calibration_borrowed_from_as_written" not in describe(shipped)
    assert set(shipped.calibration) == {"as_written", "translated", "generated", "pivot_copies"}
    without = replace(shipped, calibration={k: v for k, v in shipped.calibration.items() if k != "pivot_copies"})
    assert describe(without)["calibration_borrowed_from_as_written"] == ["pivot_copies"]


def test_predicting_without_one_path_id_per_row_is_a_bug_that_stops() -> None:
    """Calibrated or not, a model asked to score rows with a path id missing refuses rather than guess."""
    rng = np.random.default_rng(6)
    rows, labels, path = _paths(rng, 20, 10)
    fitted = fit(rows, labels, path, {}, features=("dense_z", "coverage"))
    for model in (fitted, replace(fitted, calibration={})):
        assert len(model.predict(rows, path)) == len(rows)
        with pytest.raises(ValueError, match="one path id per candidate row"):
            model.predict(rows, path[:-1])


def _copy_paths(rng: np.random.Generator, paths: int, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pivot-copy paths whose gold is told apart the other way round from ``_paths``'s: by coverage, while a high
    cosine means nothing (what a translator's copies can do to the question's own evidence)."""
    rows, _, path = _paths(rng, paths, size)
    rows[:, FEATURES.index("pivot_copy")] = 1.0
    merit = 2 * rows[:, FEATURES.index("coverage")] + rng.gumbel(size=len(path))
    labels = np.zeros(len(path))
    for number in range(paths):
        mine = np.flatnonzero(path == number)
        labels[mine[np.argmax(merit[mine])]] = 1.0
    return rows, labels, path + 10_000  # path ids of their own


def _mrr(model: RelevanceModel, rows: np.ndarray, labels: np.ndarray, path: np.ndarray) -> float:
    scores = model.predict(rows, path)
    return float(np.mean([1.0 / (1 + np.flatnonzero(labels[mine][np.argsort(-scores[mine], kind="stable")])[0])
                          for mine in (path == p for p in np.unique(path)) if labels[mine].any()]))


def test_copy_paths_are_ranked_by_weights_of_their_own_and_the_question_s_paths_rank_as_before() -> None:
    """Fitted beside the question's own paths, pivot-copy paths get weights of their own once there are enough of
    them to rank (``MIN_OWN_PATHS``): the shared weights, which read the cosine, would rank these copies badly. The
    question's own paths are ranked as well as without copies, and the model travels as JSON with its copy
    weights."""
    from babelrag.relevance.learn import MIN_OWN_PATHS

    rng = np.random.default_rng(7)
    own_rows, own_labels, own_path = _paths(rng, 120, 20)
    copy_rows, copy_labels, copy_path = _copy_paths(rng, 120, 20)
    rows, labels = np.vstack([own_rows, copy_rows]), np.concatenate([own_labels, copy_labels])
    path = np.concatenate([own_path, copy_path])
    features = ("dense_z", "coverage")
    alone = fit(own_rows, own_labels, own_path, {}, features=features)
    both = fit(rows, labels, path, {}, features=features)
    assert set(both.kind_coef) == {"pivot_copies"}
    assert both.kind_coef["pivot_copies"][1] > 0 > alone.coef[1]  # coverage: evidence on copies, against elsewhere
    assert _mrr(both, copy_rows, copy_labels, copy_path) > 0.5
    assert _mrr(alone, copy_rows, copy_labels, copy_path) < 0.2
    assert _mrr(both, own_rows, own_labels, own_path) == pytest.approx(_mrr(alone, own_rows, own_labels, own_path),
                                                                        abs=0.01)
    again = RelevanceModel.from_dict(json.loads(json.dumps(both.to_dict())))
    assert np.allclose(again.predict(rows, path), both.predict(rows, path))
    for paths, own in ((MIN_OWN_PATHS - 1, False), (MIN_OWN_PATHS, True)):  # every copy path here has a gold
        few = np.isin(copy_path, np.unique(copy_path)[:paths])
        shy = fit(np.vstack([own_rows, copy_rows[few]]), np.concatenate([own_labels, copy_labels[few]]),
                  np.concatenate([own_path, copy_path[few]]), {}, features=features)
        assert ("pivot_copies" in shy.kind_coef) == own  # too few copy paths to rank: the shared weights


def test_a_fitted_model_gets_copy_weights_afterwards_each_fold_without_the_questions_it_holds_out() -> None:
    """``fit_kind`` (how the shipped model learns copy paths): the full model learns from every copy path, each fold
    model only from the questions it does not hold out, so a training question's copy path is still scored by a
    model that never saw it; the question's own paths are scored exactly as before."""
    from babelrag.relevance.learn import crossfit, fit_kind
    from babelrag.relevance.model import question_hash

    rng = np.random.default_rng(8)
    own_rows, own_labels, own_path = _paths(rng, 150, 20)
    texts = [f"q{p}" for p in own_path]
    groups = np.array([f"g{p % 5}" for p in own_path], dtype=object)
    group_texts: dict[str, list[str]] = {}
    for text, group in dict(zip(texts, groups)).items():
        group_texts.setdefault(group, []).append(text)
    model = crossfit(own_rows, own_labels, groups, group_texts, own_path, {}, features=("dense_z", "coverage"))
    assert len(model.folds) == 5
    copy_rows, copy_labels, copy_path = _copy_paths(rng, 150, 20)
    copy_texts = [f"q{p - 10_000}" for p in copy_path]  # each copy path is a training question's
    fitted = fit_kind(model, "pivot_copies", copy_rows, copy_labels, copy_texts, copy_path)
    assert np.allclose(fitted.predict(own_rows, own_path), model.predict(own_rows, own_path))
    assert _mrr(fitted, copy_rows, copy_labels, copy_path) > 0.5
    assert _mrr(model, copy_rows, copy_labels, copy_path) < 0.2
    again = RelevanceModel.from_dict(json.loads(json.dumps(fitted.to_dict())))
    assert all(np.array_equal(a.kind_coef["pivot_copies"], b.kind_coef["pivot_copies"])
               for a, b in zip(again.folds, fitted.folds, strict=True))
    assert "folds_with_shared_weights" not in fitted.meta
    held = np.array([model.fold_of[question_hash(t)] for t in copy_texts])
    for number, fold in enumerate(fitted.folds):
        kept = held != number
        alone = fit_kind(model.folds[number], "pivot_copies", copy_rows[kept], copy_labels[kept],
                         list(np.asarray(copy_texts)[kept]), copy_path[kept])
        assert np.allclose(fold.kind_coef["pivot_copies"], alone.kind_coef["pivot_copies"])
    with pytest.raises(ConfigError, match="need 30 paths"):
        fit_kind(model, "pivot_copies", copy_rows[:200], copy_labels[:200], copy_texts[:200], copy_path[:200])


def test_copy_weights_carried_to_a_refit_give_the_copy_paths_the_same_probabilities() -> None:
    """``carry_kind`` (how a refit of the shared weights keeps copy weights whose copies cost a model call per
    passage): on another standardisation and intercept the copy paths' probabilities are the source's, the
    question's own paths are the refit's, and the fold models rank copies by their shared weights."""
    from babelrag.relevance.learn import carry_kind, crossfit, fit_kind

    rng = np.random.default_rng(9)
    own_rows, own_labels, own_path = _paths(rng, 150, 20)
    groups = np.array([f"g{p % 5}" for p in own_path], dtype=object)
    group_texts: dict[str, list[str]] = {}
    for path, group in zip(own_path, groups):
        group_texts.setdefault(group, []).append(f"q{path}")
    features = ("dense_z", "coverage")
    model = crossfit(own_rows, own_labels, groups, group_texts, own_path, {}, features=features)
    copy_rows, copy_labels, copy_path = _copy_paths(rng, 150, 20)
    source = fit_kind(model, "pivot_copies", copy_rows, copy_labels, [f"q{p - 10_000}" for p in copy_path], copy_path)
    more_rows, more_labels, more_path = _paths(rng, 60, 20)
    more_rows[:, FEATURES.index("coverage")] += 0.7  # the refit's data: another mean and scale
    refit = crossfit(np.vstack([own_rows, more_rows]), np.concatenate([own_labels, more_labels]),
                     np.concatenate([groups, np.array([f"h{p % 3}" for p in more_path], dtype=object)]), group_texts,
                     np.concatenate([own_path, more_path + 50_000]), {}, features=features)
    refit = replace(refit, intercept=0.4)
    assert not np.allclose(refit.mean, source.mean)
    carried = carry_kind(source, refit, "pivot_copies")
    assert np.allclose(carried.predict(copy_rows, copy_path), source.predict(copy_rows, copy_path))
    assert np.allclose(carried.predict(own_rows, own_path), refit.predict(own_rows, own_path))
    assert not np.allclose(refit.predict(copy_rows, copy_path), source.predict(copy_rows, copy_path))
    assert all("pivot_copies" not in fold.kind_coef and "pivot_copies" not in fold.calibration
               for fold in carried.folds)
    assert carried.meta["folds_with_shared_weights"] == {"pivot_copies": len(carried.folds)}
    # copies fitted again on the carried model: every fold has weights of its own, and the carry's count goes
    refitted = fit_kind(carried, "pivot_copies", copy_rows, copy_labels, [f"q{p - 10_000}" for p in copy_path],
                        copy_path)
    assert all("pivot_copies" in fold.kind_coef for fold in refitted.folds)
    assert "folds_with_shared_weights" not in refitted.meta
    with pytest.raises(ConfigError, match="no weights of its own"):
        carry_kind(refit, source, "pivot_copies")
    other = crossfit(own_rows, own_labels, groups, group_texts, own_path, {}, features=("dense_z",))
    with pytest.raises(ConfigError, match="same features"):
        carry_kind(source, other, "pivot_copies")


def test_a_far_off_candidate_gets_probability_zero_without_an_overflow_warning() -> None:
    import warnings

    from babelrag.relevance.model import sigmoid

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the naive 1 / (1 + e^-x) overflows at x = -1000 and warns
        got = sigmoid(np.array([-1000.0, -2.0, 0.0, 2.0, 1000.0]))
    np.testing.assert_allclose(got, [0.0, 1 / (1 + np.exp(2.0)), 0.5, 1 / (1 + np.exp(-2.0)), 1.0], rtol=1e-12)
