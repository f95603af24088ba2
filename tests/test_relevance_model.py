"""The learned relevance model: the features it reads about each candidate, its path kinds and
calibration, how it travels as JSON, and the shipped model's behaviour on a same-language distractor against a
clearly closer cross-lingual gold page."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from babelrag.config import preset_config
from babelrag.errors import IndexMismatch
from babelrag.evaluate.golden import GoldenQuestion
from babelrag.kb import KnowledgeBase
from babelrag.relevance.features import FEATURES, feature_matrix
from babelrag.relevance.learn import fit
from babelrag.relevance.model import default_model
from babelrag.tune.fitting import clear_path_rates
from babelrag.tune.training import collect
from babelrag.types import Hit, Passage, SearchRequest


def hit(pid: str, lang: str, dense: float, bm25: float = 0.0, terms: tuple[int, ...] = ()) -> Hit:
    signals = {"cosine": dense, "centered": dense, **({"bm25": bm25, "bm25_rank": 1.0} if bm25 else {})}
    return Hit(Passage(pid, "text " * 20, pid, lang), 0.0, "p", frozenset(terms), signals)


def test_features_describe_candidates_relative_to_their_path() -> None:
    hits = [hit("a", "de", 0.9, 12.0, (1, 2)), hit("b", "en", 0.8), hit("c", "de", 0.7, 3.0, (2,))]
    rows = feature_matrix(hits, SearchRequest("q", "kb", "de", origin="translated"), frozenset({1, 2}))
    column = {name: rows[:, i] for i, name in enumerate(FEATURES)}
    assert np.allclose(column["dense"], [0.9, 0.8, 0.7], atol=1e-6)
    assert np.allclose(column["dense_gap"], [0.0, -0.1, -0.2], atol=1e-6)
    assert np.allclose(column["bm25_norm"], [1.0, 0.0, 0.25]) and list(column["bm25_hit"]) == [1, 0, 1]
    assert list(column["coverage"]) == [1.0, 0.0, 0.5] and list(column["same_lang"]) == [1, 0, 1]
    assert list(column["same_script"]) == [1, 1, 1] and set(column["translated"]) == {1.0}
    assert list(column["dense_rank"]) == pytest.approx(np.log([1, 2, 3]))
    assert list(column["bm25_rank"]) == pytest.approx(np.log([1, 4, 1]))  # not returned: past every candidate
    z = lambda v: (np.array(v) - np.mean(v)) / np.std(v)  # noqa: E731
    assert list(column["dense_z"]) == pytest.approx(z([0.9, 0.8, 0.7]), abs=1e-5)
    assert list(column["bm25_z"]) == pytest.approx(z([12.0, 0.0, 3.0]))
    assert list(column["hybrid"]) == pytest.approx(z([0.9, 0.8, 0.7]) + 0.5 * z([12.0, 0.0, 3.0]), abs=1e-5)
    assert list(column["length"]) == pytest.approx([np.log1p(100)] * 3) and set(column["generated"]) == {0.0}
    assert list(column["coverage:same_script"]) == [1.0, 0.0, 0.5]
    assert list(column["dense_gap:same_lang"]) == pytest.approx([0.0, 0.0, -0.2], abs=1e-6)
    arabic = feature_matrix(hits, SearchRequest("q", "kb", "ar", origin="generated"), frozenset({1, 2}))
    assert list(arabic[:, FEATURES.index("same_script")]) == [0, 0, 0]
    assert set(arabic[:, FEATURES.index("generated")]) == {1.0}


def test_the_parallel_share_is_the_share_of_candidates_whose_page_the_path_found_in_several_languages() -> None:
    def version(page: str, lang: str, dense: float) -> Hit:
        return Hit(Passage(f"{page}@{lang}", "text " * 20, page, lang), 0.0, "p", None, {"cosine": dense, "centered": dense})

    hits = [version("p1", "de", 0.9), version("p1", "en", 0.8), version("p2", "de", 0.7), version("p3", "zh", 0.6)]
    rows = feature_matrix(hits, SearchRequest("q", "kb", "de"), frozenset())
    column = {name: rows[:, i] for i, name in enumerate(FEATURES)}
    assert set(column["par_share"]) == {0.5}  # p1 came in two languages: 2 of the 4 candidates
    assert list(column["same_lang:par_share"]) == [0.5, 0.0, 0.5, 0.0]
    assert list(column["hybrid:par_share"]) == pytest.approx(column["hybrid"] * 0.5)
    scattered = feature_matrix([version(f"p{i}", lang, 0.9 - i / 10) for i, lang in enumerate("de en zh".split())],
                               SearchRequest("q", "kb", "de"), frozenset())
    assert not scattered[:, [FEATURES.index(name) for name in FEATURES if "par_share" in name]].any()


def test_a_path_kind_calibrated_afterwards_keeps_the_weights_and_every_other_kind() -> None:
    from babelrag.errors import ConfigError
    from babelrag.relevance.features import PIVOT_COPY
    from babelrag.relevance.learn import calibrate_kind
    from babelrag.relevance.model import RelevanceModel

    rng = np.random.default_rng(3)
    rows = np.zeros((600, len(FEATURES)))
    rows[:, FEATURES.index("hybrid")] = rng.normal(size=600)
    labels = (rows[:, FEATURES.index("hybrid")] + rng.normal(size=600) > 1.5).astype(float)
    model = fit(rows, labels, np.arange(600) // 20, {}, features=("hybrid",))  # as written only
    copies = rows.copy()
    copies[:, FEATURES.index(PIVOT_COPY)] = 1.0
    relevant_more_often = (copies[:, FEATURES.index("hybrid")] + rng.normal(size=600) > 0.0).astype(float)
    paths = np.arange(600) // 20
    calibrated = calibrate_kind(model, "pivot_copies", copies, relevant_more_often, ["q"] * 600, paths)
    before, after = model.predict(copies, paths).mean(), calibrated.predict(copies, paths).mean()
    assert abs(after - relevant_more_often.mean()) < 0.02 < abs(before - relevant_more_often.mean())
    assert np.allclose(calibrated.predict(rows, paths), model.predict(rows, paths))
    assert np.array_equal(calibrated.coef, model.coef)
    assert RelevanceModel.from_dict(calibrated.to_dict()).calibration == calibrated.calibration
    with pytest.raises(ConfigError, match="paths of the named kind"):
        calibrate_kind(model, "pivot_copies", rows, labels, ["q"] * 600, paths)  # these are not copy-path rows


def test_the_model_travels_as_json_with_its_fold_models() -> None:
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(2000, len(FEATURES)))
    rows[:, FEATURES.index("pivot_copy")] = 0.0  # the paths are the question's own (copy paths are never fitted on)
    labels = (rng.random(2000) < 1 / (1 + np.exp(-(2.0 * rows[:, 0] - 1.0)))).astype(float)
    model = fit(rows, labels, np.arange(2000) // 40, {"name": "t", "embedder": "e"})
    again = type(model).from_dict(json.loads(json.dumps(model.to_dict())))
    paths = np.arange(50) // 40  # as fitted
    assert np.allclose(again.predict(rows[:50], paths), model.predict(rows[:50], paths))


@pytest.mark.slow
def test_the_shipped_model_is_calibrated_on_held_out_questions_per_path_type(xquad_store: str,
                                                                             small_xquad: list[Path]) -> None:
    """Reliability on questions the shipped model never saw (XQuAD articles of the test split, every language),
    per path type. The fixture is a tiny parallel KB (6 pages × 8 languages, every candidate of the KB on the
    path), far from the pools the model was calibrated on. What matters for τ is checked first: the shipped τ
    drops no more of the gold candidates than the loss it was calibrated for. Then the probability a user reads
    first, each path's top hit: within 0.05 of the observed rate (measured: 0.998 predicted, 0.985 observed;
    0.975 with the calibration before the path softmax). Then no relevant candidate is more than five times as
    likely as predicted. Fitted to rank, the model scores a gold page's best version, and the path softmax shares
    the path's mass among its candidates, so on a parallel KB the other versions — relevant too — are
    under-predicted: measured here 0.122 predicted, 0.563 observed in the ninth as-written decile with the
    language centroids (their sharper ranking: the top decile 0.590 / 0.926, the bottom six observe at most 0.001),
    0.185 / 0.509 before them (when this bound was three times), 0.294 / 0.515 before the path softmax (twice; the
    pointwise model was within 0.1). The other way, no
    decile of the question's own or translated paths predicts more than twice what it observes beyond 0.05
    (measured at most 0.050 predicted against 0.018 observed). Generated paths are over-predicted on this fixture
    (their sixth decile 0.48 predicted, 0.016 observed; 0.58 before): not asserted, reported in the README.
    Reliability on the benchmark layouts' test articles is measured by ``benchmarks/default_relevance.py``."""
    from babelrag.experiments.squad import load_squad_folder
    from babelrag.experiments.xquad_cells import DEV_SHARE, split_of
    from babelrag.tune.fitting import reliability, top_of_each_path

    corpus = load_squad_folder(small_xquad[0].parent)
    assert {split_of(title, DEV_SHARE) for title in corpus.titles.values()} == {"test"}  # never fitted on these
    golden = [GoldenQuestion(id=f"{q.lang}:{q.qid}", question=q.text, lang=q.lang, kb="xq", gold_pages=(q.page,),
                             tags={"qid": q.qid}) for q in corpus.questions if q.lang in ("de", "en", "zh", "ar")]
    model = default_model()
    assert not model.fitted_on([q.question for q in golden])
    with KnowledgeBase.open("xq", xquad_store) as kb:
        candidates = collect(kb, golden, preset_config("+country"), generated=True)
    scores = model.predict(candidates.rows, candidates.path_keys())
    kinds = {"as written": (candidates.rows[:, FEATURES.index("translated")] == 0) &
                           (candidates.rows[:, FEATURES.index("generated")] == 0),
             "translated": candidates.rows[:, FEATURES.index("translated")] > 0,
             "generated": candidates.rows[:, FEATURES.index("generated")] > 0}
    gold = candidates.labels > 0
    budget = model.meta["threshold_calibration"]["budget"]
    assert ((scores < model.meta["threshold"]) & gold).sum() <= budget * gold.sum()
    top = top_of_each_path(candidates, scores)
    for kind, mask in kinds.items():
        mine = top[mask[top]]
        assert len(mine), kind  # the fixture searches every kind of path
        predicted, observed = scores[mine].mean(), candidates.labels[mine].mean()
        assert abs(predicted - observed) <= 0.05 + 3 * np.sqrt(observed * (1 - observed) / len(mine)), (kind, predicted)
        for n, predicted, observed in reliability(scores[mask], candidates.labels[mask], bins=10):
            # binomial noise on n candidates plus 0.1 of tolerance: a model under-predicting by more than 5× fails
            noise = 3 * np.sqrt(max(predicted * (1 - predicted), 1e-4) / n)
            assert observed - 5 * predicted <= 0.1 + noise, (kind, n, predicted, observed)
            if kind != "generated":  # over-prediction: the question's own and translated paths
                assert predicted - 2 * observed <= 0.05 + noise, (kind, n, predicted, observed)


def test_the_shipped_model_is_documented_and_refuses_another_embedder() -> None:
    model = default_model()
    assert model.meta["trained_on"].startswith("the shipped data's dev split") and model.meta["questions"] > 100
    assert set(model.features) <= set(FEATURES)
    with pytest.raises(IndexMismatch, match="relevance model embedder"):
        model.check("another-embedder", "kb")


def _path(query_lang: str, gold: tuple[str, float, float], distractor: tuple[str, float, float]) -> list[Hit]:
    """A path's candidates as a multilingual embedder sees them: the path language's pages a little closer
    (the language bias), the rest further; ``gold``/``distractor``: (lang, cosine, BM25)."""
    rng = np.random.default_rng(7)
    hits = [hit("gold", gold[0], gold[1], gold[2], (1, 2) if gold[2] else ()),
            hit("distractor", distractor[0], distractor[1], distractor[2], (1, 2) if distractor[2] else ())]
    hits += [hit(f"same{i}", query_lang, 0.80 + 0.01 * rng.standard_normal(), 4.0 * rng.random(),
                 (2,) if i % 3 == 0 else ()) for i in range(20)]
    hits += [hit(f"other{i}", ("en", "zh", "ar")[i % 3] if query_lang != "en" else ("de", "zh", "ar")[i % 3],
                 0.76 + 0.01 * rng.standard_normal()) for i in range(28)]
    return hits


def test_a_same_language_distractor_does_not_beat_a_clearly_closer_cross_lingual_gold_page() -> None:
    from babelrag.relevance.learned import LearnedReranker

    def ranked(hits: list[Hit], lang: str) -> list[str]:
        reranker = LearnedReranker(default_model())
        scores = reranker.score("wie viele Punkte", hits, SearchRequest("q", "kb", lang))
        return [hits[i].passage.id for i in np.argsort(-np.array(scores), kind="stable")]

    # the gold page in English, clearly closer than any German candidate; a German page matches keywords
    cross = _path("de", gold=("en", 0.86, 0.0), distractor=("de", 0.83, 12.0))
    assert ranked(cross, "de")[0] == "gold"
    # The other way round (a German gold page with its keywords, clearly closest) is checked on real candidates
    # below: this path sets each candidate's language-centred cosine to its raw cosine, where the real centred
    # cosines run about 0.08 lower for the path's own language than for the others, so the language-centroid
    # features read a same-language page here as the embedder's bias inflated it, which they never see in use.
    # what the z-score hybrid order did with the first path: the keyword match came first
    z = lambda v: (np.array(v) - np.mean(v)) / np.std(v)  # noqa: E731
    hybrid = z([h.signals["cosine"] for h in cross]) + \
        0.5 * z([h.signals.get("bm25", 0.0) for h in cross])
    assert cross[int(np.argmax(hybrid))].passage.id == "distractor"


@pytest.mark.slow
def test_on_a_real_scattered_kb_a_clear_gold_page_wins_in_either_language(tmp_path: Path) -> None:
    """The shipped model on the scattered layout built from the shared XQuAD data (each page in one language),
    questions of its test articles (never fitted on) as written, in four languages. Two kinds of path, chosen by
    what retrieval saw, not by the model (``tune/fitting.py: clear_paths``): (1) the gold page is in another
    language, it is the path's closest candidate and 0.02 closer than every page in the question's language, and
    one of those has the path's best keyword match; the model must rank the gold page above every same-language
    page, which the z-score hybrid order does not. (2) The gold page is in the question's language and is the
    path's top candidate by cosine and by BM25; the model must keep it in its top three (the trade the model makes
    for cross-lingual gold pages must not cost a clear native one). Measured on all eight languages' test
    questions (``benchmarks/clear_paths.py``, which reports every layout): (1) 427 paths, the model 1.000 (the
    4 December model 1.000), hybrid 0.768; (2) 393 paths, top three 0.992 and first 0.926 (the 4 December model
    0.992 and 0.929)."""
    from conftest import DATA
    from babelrag.experiments.runner import build_data, ensure_indexes

    data = build_data(DATA, tmp_path / "data", quick=False, seed=13, datasets=["scattered"])
    store = str(tmp_path / "store")
    ensure_indexes(data.indexes, store)
    (index,) = data.indexes
    asked = [q for q in data.golden if q.index == index and q.tags.get("split") == "test" and
             q.lang in ("ar", "de", "en", "zh")]
    model = default_model()
    assert not model.fitted_on([q.question for q in asked])
    with KnowledgeBase.open(index, store) as kb:
        found = collect(kb, asked, preset_config("+country"), translated_paths=False)
    learned = clear_path_rates(found, model.predict(found.rows, found.path_keys()))
    hybrid = clear_path_rates(found, found.rows[:, FEATURES.index("hybrid")])  # the z-score hybrid order
    assert learned["cross-lingual paths"] >= 100 and learned["native paths"] >= 100, learned  # both kinds occur
    assert learned["gold above"] >= 0.98 and hybrid["gold above"] <= 0.9, (learned, hybrid)
    assert learned["top three"] >= 0.97 and learned["first"] >= 0.85, learned
