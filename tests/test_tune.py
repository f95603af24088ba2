"""The learned relevance stage and `babelrag tune`: features, the calibrated model, per-cell choice with
shrinkage and budgets, profiles refused for another KB or embedder, and the whole tune → search loop on
real XQuAD paragraphs with the real engine."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from babelrag.config import preset_config
from babelrag.errors import ConfigError, IndexMismatch, InputError
from babelrag.evaluate.golden import GoldenQuestion
from babelrag.ingest.pipeline import index_sources
from babelrag.ingest.pivot_copies import make_pivot_copies
from babelrag.kb import KnowledgeBase
from babelrag.relevance.features import FEATURES, feature_matrix
from babelrag.relevance.learn import fit
from babelrag.relevance.model import default_model, question_hash
from babelrag.retrieve.pipeline import Searcher
from babelrag.strategies.tuned import OPTIONS, CellRule, Profile, Tuned, load_profile
from babelrag.tune.choose import DevRow, choose, shrunk_objectives
from babelrag.tune.fitting import SIMPLEST_FIRST
from babelrag.tune.runner import TuneOptions, tune, write_profile
from babelrag.types import Hit, Passage, Question, SearchRequest

from conftest import XQUAD_LANGS, ProfessionalTranslations


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
    from babelrag.tune.training import collect

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


def rows(option: str, cells: dict[str, tuple[int, float, float]]) -> list[DevRow]:
    """``cells``: "COUNTRY|lang" → (questions, objective, llm calls)."""
    out = []
    for cell, (n, objective, calls) in cells.items():
        country, lang = cell.split("|")
        out += [DevRow(f"{cell}:{i}", country, lang, objective, calls,
                       {"evidence": [{"doc_id": "g", "score": 0.9}], "gold_pages": ["g"]}) for i in range(n)]
    return out


@pytest.mark.parametrize("objective, calls", [(float("nan"), 0.0), (float("inf"), 0.0), (0.5, float("nan")),
                                                (0.5, float("inf")), (0.5, -1.0)])
def test_a_dev_row_that_no_comparison_could_rank_is_refused(objective: float, calls: float) -> None:
    # a NaN objective would lose every comparison in silence: the option dropped, a margin never met
    with pytest.raises(ValueError, match="must be finite"):
        DevRow("q1:sv", "SE", "sv", objective, calls, {})


def test_cells_choose_what_their_shrunk_dev_results_favour_within_the_budget() -> None:
    plain = rows("as_written", {"SE|sv": (20, 0.5, 0), "SE|en": (20, 0.9, 0), "SE|id": (3, 0.5, 0)})
    translated = rows("kb", {"SE|sv": (20, 0.8, 1), "SE|en": (20, 0.9, 1), "SE|id": (3, 1.0, 1)})
    results = {"as_written": plain, "as_written+kb_languages": translated}
    costs = {"as_written": 0.0, "as_written+kb_languages": 1.0}
    global_rule, kbs, cells = choose(results, costs, max_llm_calls=1.0, cell_min=10)
    assert cells["SE|sv"].option == "as_written+kb_languages"  # translation measurably helps here
    assert cells["SE|en"].option == "as_written"  # a tie: no LLM call where translation never helps
    assert "SE|id" not in cells and kbs["SE"].option == "as_written+kb_languages"  # 3 questions: the KB's rule
    assert cells["SE|sv"].n_dev == 20 and cells["SE|sv"].source == "cell"
    _, _, no_budget = choose(results, costs, max_llm_calls=0.0, cell_min=10)
    assert {rule.option for rule in no_budget.values()} == {"as_written"}


def test_a_rank_fused_option_gets_no_threshold_and_its_searches_none(tuned_kb: str, tmp_path: Path) -> None:
    plain = rows("as_written", {"SE|sv": (200, 0.5, 0)})
    fused = rows("copies", {"SE|sv": (200, 0.9, 0)})
    results = {"as_written": plain, "as_written+pivot_copies": fused}
    global_rule, _, cells = choose(results, {"as_written": 0.0, "as_written+pivot_copies": 0.0}, 0.0, cell_min=10)
    assert cells["SE|sv"].option == "as_written+pivot_copies" and cells["SE|sv"].threshold is None
    assert choose({"as_written": plain}, {"as_written": 0.0}, 0.0, cell_min=10)[2]["SE|sv"].threshold is not None
    with KnowledgeBase.open("xt", tuned_kb) as kb:
        profile = profile_for(kb, options=dict(OPTIONS)).model_copy(update={"cells": {"*|de": CellRule(
            option="as_written+pivot_copies", threshold=0.5)}})
        write_profile(profile, tmp_path / "xt.yaml")
        config, why = Tuned(None).resolve(Question("Wer?", lang="de"), kb, preset_config("tuned", {"profile": str(tmp_path)}))
    assert (config.merge, config.threshold, config.extra_paths) == ("rrf", None, ("pivot_copies",))
    assert why["option"] == "as_written+pivot_copies" and why["threshold"] is None  # as applied: none for RRF


def test_shrinkage_pulls_small_cells_toward_their_kb() -> None:
    members = rows("o", {"SE|sv": (2, 1.0, 0), "SE|en": (40, 0.5, 0)})
    shrunk = shrunk_objectives(members, prior=10.0)
    assert shrunk["SE|sv"] < 0.7  # two lucky questions are not evidence of a 1.0 cell
    assert abs(shrunk["SE|en"] - 0.5) < 0.02


def test_a_question_asked_in_several_languages_is_one_question_of_evidence() -> None:
    def asked(country: str, langs: tuple[str, ...], count: int, objective: float) -> list[DevRow]:
        return [DevRow(f"{country}{i}:{lang}", country, lang, objective, 0.0,
                       {"id": f"{country}{i}:{lang}", "tags": {"qid": f"{country}{i}"},
                        "evidence": [{"doc_id": "g", "score": 0.9}], "gold_pages": ["g"]})
                for i in range(count) for lang in langs]
    # SE: 4 questions, each asked in three languages (12 rows); PL: 40 questions in one
    members = asked("SE", ("sv", "en", "de"), 4, 1.0) + asked("PL", ("pl",), 40, 0.0)
    shrunk = shrunk_objectives(members, prior=10.0)
    # 4 questions against a prior of 10: (4·1 + 10·12/52)/14 = 0.45 (counting rows would give 0.65)
    assert shrunk["SE"] == pytest.approx((4 + 10 * 12 / 52) / 14)
    global_rule, kbs, cells = choose({"as_written": members}, {"as_written": 0.0}, 0.0, cell_min=10)
    assert global_rule.n_dev == 44 and kbs["PL"].n_dev == 40
    assert "SE" not in kbs  # 4 questions carry no rule of their own, however many languages ask them


def test_a_scope_takes_the_simplest_option_within_one_standard_error_of_the_best() -> None:
    def dev(objectives: list[float], langs: tuple[str, ...] = ("en",), country: str = "SE") -> list[DevRow]:
        """Question i asked in every one of ``langs`` (its versions share a qid), each with ``objectives[i]``."""
        return [DevRow(f"q{i}:{lang}", country, lang, value, 0.0,
                       {"id": f"q{i}:{lang}", "tags": {"qid": f"q{i}"}, "evidence": [{"doc_id": "g", "score": 0.9}],
                        "gold_pages": ["g"]})
                for i, value in enumerate(objectives) for lang in langs]
    costs = {"as_written": 0.0, "as_written+pivot_copies:max": 0.0}
    copies = "as_written+pivot_copies:max"

    def chosen(plain: list[DevRow], other: list[DevRow]) -> tuple[str, ...]:
        global_rule, kbs, cells = choose({"as_written": plain, copies: other}, costs, 0.0)
        return (global_rule.option, kbs["SE"].option, *(rule.option for rule in cells.values()))

    # the copies gain 0.05 a question on average by luck (+0.55 or −0.45), each of 60 questions asked in sv and en:
    # one standard error is 0.065 counted by question (0.046 by row, which would let the copies win)
    lucky = [1.0, 0.0] * 30
    assert set(chosen(dev([0.45] * 60, ("sv", "en")), dev(lucky, ("sv", "en")))) == {"as_written"}
    # the same gain on every question, or a larger one through the same noise (0.15 ± 0.4): the copies
    assert set(chosen(dev([0.45] * 60, ("sv", "en")), dev([0.5] * 60, ("sv", "en")))) == {copies}
    assert set(chosen(dev([0.45] * 60, ("sv", "en")), dev([1.0, 0.2] * 30, ("sv", "en")))) == {copies}
    # a cell whose own questions show no gain keeps the question as written, whatever its KB chose
    both = dev([0.45] * 60, ("sv",)) + dev([0.45] * 60, ("en",))
    better_in_sv = dev([0.9] * 60, ("sv",)) + dev([0.45] * 60, ("en",))
    global_rule, kbs, cells = choose({"as_written": both, copies: better_in_sv}, costs, 0.0)
    assert (kbs["SE"].option, cells["SE|sv"].option, cells["SE|en"].option) == (copies, copies, "as_written")


def test_the_one_error_margin_weighs_each_question_as_the_mean_over_rows_does() -> None:
    """The objective is a mean over rows, so a question asked in three languages weighs three times one asked in one;
    its error must weigh it the same way (the cluster-robust error), not as one cluster mean among equals."""
    def dev(gains: list[float], langs: tuple[str, ...], start: int, base: float = 0.4) -> list[DevRow]:
        return [DevRow(f"q{start + i}:{lang}", "SE", lang, base + gain, 0.0,
                       {"id": f"q{start + i}:{lang}", "tags": {"qid": f"q{start + i}"},
                        "evidence": [{"doc_id": "g", "score": 0.9}], "gold_pages": ["g"]})
                for i, gain in enumerate(gains) for lang in langs]
    copies = "as_written+pivot_copies:max"

    def chosen(widely_asked: list[float], asked_once: list[float]) -> tuple[str, str]:
        plain = dev([0.0] * 20, ("sv", "en", "de"), 0) + dev([0.0] * 40, ("sv",), 20)
        other = dev(widely_asked, ("sv", "en", "de"), 0) + dev(asked_once, ("sv",), 20)
        global_rule, kbs, _ = choose({"as_written": plain, copies: other},
                                     {"as_written": 0.0, copies: 0.0}, 0.0)
        return global_rule.option, kbs["SE"].option
    # the copies' gain is noise on the 20 questions asked in three languages (+0.7 or −0.5), 0 on the 40 asked
    # once: 0.06 over rows, against an error of 0.081 (the error of the 60 question means, 0.046, lets them win;
    # at the KB, both errors times 60/70, the KB's own share of its shrunk mean)
    assert chosen([0.7, -0.5] * 10, [0.0] * 40) == ("as_written", "as_written")
    # a steady 0.03 on the widely asked questions, noise (+0.55 or −0.45) on the others: 0.038 over rows against an
    # error of 0.032 (0.053 from the question means, which keeps the question as written)
    assert chosen([0.03] * 20, [0.55, -0.45] * 20) == (copies, copies)


def test_a_scope_s_margin_is_the_error_of_the_part_of_its_shrunk_gain_its_own_questions_make() -> None:
    """A KB's shrunk gain is 30/40 its own questions' gain and 10/40 its parent's, held fixed: its error is 30/40
    the error of its own questions' gain. The whole error would keep the question as written here."""
    def dev(gains: list[float], country: str) -> list[DevRow]:
        return [DevRow(f"{country}{i}", country, "sv", 0.46 + gain, 0.0,
                       {"id": f"{country}{i}", "tags": {"qid": f"{country}{i}"},
                        "evidence": [{"doc_id": "g", "score": 0.9}], "gold_pages": ["g"]})
                for i, gain in enumerate(gains)]
    copies = "as_written+pivot_copies:max"
    plain = dev([0.0] * 30, "SE") + dev([0.0] * 30, "PL")
    # SE: the copies gain 0.08 through noise (+0.53 or −0.37), one standard error 0.084; PL: a steady −0.02
    other = dev([0.53, -0.37] * 15, "SE") + dev([-0.02] * 30, "PL")
    global_rule, kbs, cells = choose({"as_written": plain, copies: other}, {"as_written": 0.0, copies: 0.0}, 0.0)
    assert global_rule.option == "as_written"  # 0.03 over 60 questions, within its error of 0.042
    # SE's shrunk gain (30·0.08 + 10·0.03)/40 = 0.0675 is above 30/40 of 0.084 (0.063), within the whole 0.084
    assert (kbs["SE"].option, cells["SE|sv"].option) == (copies, copies)
    assert kbs["PL"].option == "as_written"


def test_thresholds_hold_the_budget_for_new_questions_and_per_cell() -> None:
    def dev(cell: str, gold_scores: list[float]) -> list[DevRow]:
        country, lang = cell.split("|")
        return [DevRow(f"{cell}:{i}", country, lang, 1.0, 0.0,
                       {"evidence": [{"doc_id": "x", "score": 0.95}, {"doc_id": "g", "score": s},
                                     {"doc_id": "y", "score": 0.01}], "gold_pages": ["g"]})
                for i, s in enumerate(gold_scores)]
    low_scoring = [0.20 + i / 100 for i in range(10)]  # SE|de: 0.20 … 0.29
    results = {"as_written": dev("SE|sv", [0.6] * 1200) + dev("SE|de", low_scoring) + dev("SE|fi", [0.5] * 10)
               + dev("PL|pl", [0.1] * 60)}
    global_rule, kbs, cells = choose(results, {"as_written": 0.0}, 0.0, cell_min=10, budget=0.005)
    assert cells["SE|sv"].threshold == pytest.approx(0.6, abs=2e-6)  # 1,200 questions vouch for a τ of its own
    # the KB may lose 5 of its 1,220 questions ((5 + 1)/1221 ≤ 0.005): the five lowest, all from SE|de
    assert kbs["SE"].threshold == pytest.approx(0.25, abs=2e-6)
    assert cells["SE|de"].threshold == pytest.approx(0.20, abs=2e-6)  # 10 questions: the KB's τ, below its golds
    assert cells["SE|fi"].threshold == pytest.approx(0.25, abs=2e-6)  # never above the KB's, for its own 0.5s
    assert global_rule.threshold == pytest.approx(0.1, abs=2e-6)  # PL's 60 golds at 0.1 are more than it may lose
    assert kbs["PL"].threshold == cells["PL|pl"].threshold == pytest.approx(0.1, abs=2e-6)  # 60 vouch for none: inherited
    few = {"as_written": dev("SE|sv", [0.6] * 150)}  # 150 < 199: no τ anywhere, not even at the lowest gold
    global_few, kbs_few, _ = choose(few, {"as_written": 0.0}, 0.0, cell_min=10, budget=0.005)
    assert global_few.threshold is None and kbs_few["SE"].threshold is None


def profile_for(kb: KnowledgeBase, **changes) -> Profile:
    return Profile(kb=kb.name, kb_created_at=kb.manifest.created_at, embedder=kb.embedder.fingerprint(),
                   global_rule=CellRule(option="as_written", threshold=0.01),
                   cells={"*|de": CellRule(option="as_written", threshold=0.5, k=3, n_dev=12)}, **changes)


@pytest.fixture(scope="module")
def tuned_kb(tmp_path_factory: pytest.TempPathFactory, small_xquad: list[Path]):
    """The small real XQuAD KB in its own store (tuning writes its manifest)."""
    store = str(tmp_path_factory.mktemp("tune_store"))
    index_sources("xt", [str(p) for p in small_xquad], store)
    return store


def test_tuned_search_applies_the_cell_rule_and_records_it(tuned_kb: str, tmp_path: Path) -> None:
    with KnowledgeBase.open("xt", tuned_kb) as kb:
        write_profile(profile_for(kb), tmp_path / "xt.yaml")
        config = preset_config("tuned", {"profile": str(tmp_path)})
        german = Searcher(kb, config).search(Question("Wer hat den Super Bowl 50 gewonnen?", lang="de"))
        resolve = next(s for s in german.trace.steps if s.stage == "resolve")
        assert resolve.data == {"rule": "*|de", "source": "cell", "option": "as_written", "threshold": 0.5, "k": 3}
        assert 1 <= german.passed <= 3 and all(h.score >= 0.5 for h in german.evidence.hits)
        english = Searcher(kb, config).search(Question("Who won Super Bowl 50?", lang="en"))
        assert next(s for s in english.trace.steps if s.stage == "resolve").data["rule"] == "global"
        assert english.passed == 10


def test_a_threshold_and_k_the_user_set_stand_against_the_cell_rule(tuned_kb: str, tmp_path: Path) -> None:
    """The rule's τ applies only where the user set none, and its k only lowers the user's; the trace records what
    was applied."""
    with KnowledgeBase.open("xt", tuned_kb) as kb:
        write_profile(profile_for(kb), tmp_path / "xt.yaml")  # *|de: τ 0.5, k 3
        german = Question("Wer?", lang="de")
        own = preset_config("tuned", {"profile": str(tmp_path), "threshold": 0.2, "k": 2})
        config, why = Tuned(None).resolve(german, kb, own)
        assert (config.threshold, config.k, why["threshold"], why["k"]) == (0.2, 2, 0.2, 2)
        config, why = Tuned(None).resolve(german, kb, preset_config("tuned", {"profile": str(tmp_path), "k": 5}))
        assert (config.threshold, config.k, why["threshold"]) == (0.5, 3, 0.5)


@pytest.mark.parametrize("text, expected", [
    ("kb: [unclosed\n  secret-value", "not YAML (line"),
    ("kb: xt\nsecret_field_name_that_is_long_enough_to_be_clipped_somewhere: 1\n", "not a babelrag profile"),
])
def test_a_damaged_profile_is_refused_without_quoting_it(tuned_kb: str, tmp_path: Path, text: str,
                                                         expected: str) -> None:
    (tmp_path / "xt.yaml").write_text(text, encoding="utf-8")
    with KnowledgeBase.open("xt", tuned_kb) as kb, pytest.raises(ConfigError) as error:
        load_profile(kb, str(tmp_path))
    assert expected in str(error.value)
    assert "secret-value" not in str(error.value) and "somewhere" not in str(error.value)


def test_a_tuned_searchs_cell_searchers_share_its_relevance_model(tuned_kb: str, tmp_path: Path) -> None:
    with KnowledgeBase.open("xt", tuned_kb) as kb:  # a profile with a model of its own: read once, not per cell
        write_profile(profile_for(kb, model=default_model().to_dict()), tmp_path / "xt.yaml")
        searcher = Searcher(kb, preset_config("tuned", {"profile": str(tmp_path)}))
        for question in (Question("Wer hat den Super Bowl 50 gewonnen?", lang="de"), Question("Who won?", lang="en")):
            searcher.search(question)
        cells = list(searcher._by_config.values())
    assert len(cells) == 2 and searcher.relevance is not default_model()
    assert all(cell.relevance is searcher.relevance and cell.rerank == searcher.rerank for cell in cells)


def test_questions_a_profile_was_tuned_on_stay_out_of_the_headline(tuned_kb: str, tmp_path: Path,
                                                                     small_xquad: list[Path]) -> None:
    from babelrag.evaluate.runs import run_config

    golden = [q.model_copy(update={"tags": {**q.tags, "split": "x"}}) for q in golden_for(small_xquad, "xt")
              if q.lang in ("de", "en")][:12]
    tuned, fresh = golden[:8], golden[8:]
    with KnowledgeBase.open("xt", tuned_kb) as kb:
        write_profile(profile_for(kb, tuned_on=[question_hash(q.question) for q in tuned]), tmp_path / "xt.yaml")
    config = preset_config("tuned", {"profile": str(tmp_path)})
    result = run_config("tuned", config, golden, tmp_path / "run", tuned_kb)
    assert result.metrics["overall"]["n"] == len(fresh) and result.metrics["seen"]["n"] == len(tuned)
    assert sum(bool(r.get("seen")) for r in result.rows) == len(tuned)  # scored, kept, shown apart
    with pytest.raises(ConfigError, match="every question to be scored was seen by this configuration"):
        run_config("tuned", config, tuned, tmp_path / "only-tuned", tuned_kb)


def test_a_profile_for_another_kb_or_embedder_is_refused(tuned_kb: str, tmp_path: Path) -> None:
    with KnowledgeBase.open("xt", tuned_kb) as kb:
        for changes, field in (({"kb": "other"}, "profile kb"), ({"embedder": "another"}, "profile embedder")):
            write_profile(profile_for(kb).model_copy(update=changes), tmp_path / "xt.yaml")
            with pytest.raises(IndexMismatch, match=field):
                Searcher(kb, preset_config("tuned", {"profile": str(tmp_path / "xt.yaml")})).search("Wer?")
        with pytest.raises(ConfigError, match="has no tuned profile; run `babelrag tune"):
            Searcher(kb, preset_config("tuned")).search("Wer?")


def golden_for(small_xquad: list[Path], kb: str) -> list[GoldenQuestion]:
    from babelrag.experiments.squad import load_squad_folder

    corpus = load_squad_folder(small_xquad[0].parent)
    return [GoldenQuestion(id=f"{q.lang}:{q.qid}", question=q.text, lang=q.lang, kb=kb, gold_pages=(q.page,),
                           tags={"qid": q.qid, "split": "dev" if int(q.qid[-2:], 16) % 2 else "test"})
            for q in corpus.questions]


def test_tune_refuses_bad_golden_sets_clearly(tuned_kb: str, small_xquad: list[Path]) -> None:
    golden = golden_for(small_xquad, "xt")
    with KnowledgeBase.open("xt", tuned_kb) as kb:
        with pytest.raises(ConfigError, match="names no question for knowledge base 'xt'"):
            tune(kb, [q.model_copy(update={"kb": "elsewhere"}) for q in golden])
        with pytest.raises(InputError, match="unknown language 'xx'"):
            tune(kb, [golden[0].model_copy(update={"lang": "xx"})])
        with pytest.raises(InputError, match="country 'ZZ' is not in knowledge base 'xt'"):
            tune(kb, [golden[0].model_copy(update={"country": "ZZ"})])
        few = [q for q in golden if q.tags["split"] == "dev"][:8]
        with pytest.raises(ConfigError, match="8 dev questions for 'xt'; tuning needs at least 10"):
            tune(kb, few)
        dev_qids = list(dict.fromkeys(q.tags["qid"] for q in golden if q.tags["split"] == "dev"))[:4]
        versions = [q for q in golden if q.tags["qid"] in dev_qids]  # 4 questions, each in every language
        assert len(versions) >= 12
        with pytest.raises(ConfigError, match="4 dev questions for 'xt'; tuning needs at least 10"):
            tune(kb, versions)  # its translations are not more questions
        with pytest.raises(ConfigError, match="no question is tagged split=dev"):
            tune(kb, [q.model_copy(update={"tags": {}}) for q in golden])


def test_the_bench_gives_an_index_without_dev_questions_a_profile_tuned_on_nothing(
        tuned_kb: str, small_xquad: list[Path], tmp_path: Path) -> None:
    from babelrag.experiments.runner import fit_profiles

    only_test = [q.model_copy(update={"tags": {**q.tags, "split": "test"}}) for q in golden_for(small_xquad, "xt")]
    notes = fit_profiles(only_test, ["xt"], tuned_kb, tmp_path, {str(tmp_path / "no-llm")}, None, 1)
    assert len(notes) == 1 and "no dev question in this sample" in notes[0]
    with KnowledgeBase.open("xt", tuned_kb) as kb:  # a quick bench's pooled sample: its tuned steps still run
        result = Searcher(kb, preset_config("tuned", {"profile": str(tmp_path / "no-llm")})).search(
            Question("Wer hat den Super Bowl 50 gewonnen?", lang="de"))
    resolve = next(s for s in result.trace.steps if s.stage == "resolve")
    assert resolve.data["option"] == "as_written" and resolve.data["threshold"] is None and result.passed == 10


@pytest.mark.slow
def test_tune_fits_stores_and_serves_the_profile(tmp_path: Path, small_xquad: list[Path]) -> None:
    tuned_kb = str(tmp_path / "store")  # its own store: tuning writes the manifest other tests read
    index_sources("xt", [str(p) for p in small_xquad], tuned_kb)
    golden = golden_for(small_xquad, "xt")
    with KnowledgeBase.open("xt", tuned_kb) as kb:
        result = tune(kb, golden, TuneOptions(cell_min=20))
        dev = sum(q.tags["split"] == "dev" for q in golden)
        # the shipped model competes; dev questions it was fitted on are scored by its fold models that held them
        # out (its own weights would flatter it)
        shipped_saw = default_model().fitted_on([q.question for q in golden if q.tags["split"] == "dev"])
        assert result.dev == dev and set(result.fit["cv_mrr"]) == {"full", "hybrid", "shipped"}
        assert "shipped_left_out" not in result.fit and ("shipped_out_of_fold" in result.fit) == bool(shipped_saw)
        scores = result.fit["cv_mrr"]
        # the simplest model within one standard error of the best held-out dev MRR was kept
        below = result.fit["below_best"].get(result.fit["variant"], {"mrr": 0.0, "standard_error": 0.0})
        assert scores[result.fit["best"]] == max(scores.values()) and below["mrr"] <= below["standard_error"] + 1e-4
        assert all(entry["mrr"] > entry["standard_error"] for name, entry in result.fit["below_best"].items()
                   if SIMPLEST_FIRST.index(name) < SIMPLEST_FIRST.index(result.fit["variant"]))
        assert set(result.options) == {"as_written"}  # no LLM budget: nothing that calls a model is tried
        stored = kb.manifest.profile
        if result.fit["variant"] != "shipped":
            asked = len({q.tags["qid"] for q in golden if q.tags["split"] == "dev"})
            assert stored["model"]["meta"]["trained_on"] == f"{dev} dev rows ({asked} questions) of xt"
        assert {key.split("|")[1] for key in stored["cells"]} <= set(XQUAD_LANGS)
        # every dev question it chose on is remembered, so eval keeps them out of its headline
        assert set(stored["tuned_on"]) == {question_hash(q.question) for q in golden if q.tags["split"] == "dev"}
    with KnowledgeBase.open("xt", tuned_kb) as kb:  # stored: a new process finds it
        name = kb.manifest.relevance["name"]
        assert name == ("default" if result.fit["variant"] == "shipped" else "xt-tuned")
        searcher = Searcher(kb, preset_config("tuned"))
        result = searcher.search(Question("Wer hat den Super Bowl 50 gewonnen?", lang="de"))
        assert result.evidence.scorer == f"learned:{name}" and result.evidence.hits
        assert 0.0 <= result.evidence.hits[0].score <= 1.0


@pytest.mark.slow
def test_tune_measures_the_pivot_copies_only_where_the_kb_has_them(tmp_path: Path, small_xquad: list[Path]) -> None:
    store = str(tmp_path / "store")
    index_sources("xc", [str(p) for p in small_xquad], store)
    golden = golden_for(small_xquad, "xc")
    options = TuneOptions(cell_min=20, fit_model=False, store_with_kb=False)
    with KnowledgeBase.open("xc", store) as kb:
        assert set(tune(kb, golden, options).options) == {"as_written"}
        make_pivot_copies(kb, ProfessionalTranslations(kb.collection.scroll()))
        measured = tune(kb, golden, options).options
    assert set(measured) == {"as_written", "pivot_copies", "as_written+pivot_copies",  # free at query time
                             "as_written+pivot_copies:max"}
    assert all(m["llm_calls"] == 0 for m in measured.values())


def test_measured_kb_language_targets_reach_the_translated_paths(tuned_kb: str) -> None:
    from babelrag.models.bundle import Models
    from babelrag.strategies.tuned import Tuned

    with KnowledgeBase.open("xt", tuned_kb) as kb:
        profile = profile_for(kb, targets={"*|th": ["zh", "en"]})
        profile.cells["*|th"] = CellRule(option="as_written+kb_languages", threshold=None, n_dev=12)
        stored = kb.manifest
        kb.write_manifest(stored.model_copy(update={"profile": profile.model_dump(mode="json")}))
        try:
            tuned = preset_config("tuned")
            config, why = Tuned(Models(tuned)).resolve(Question("ใครชนะ", lang="th"), kb, tuned)
        finally:
            kb.write_manifest(stored)
    assert why["option"] == "as_written+kb_languages" and config.kb_targets == ("zh", "en")
    assert config.strategy == "kb_languages" and config.extra_paths == ("as_written",)


def test_the_tuned_kb_language_paths_are_the_measured_ones(tuned_kb: str, tmp_path: Path) -> None:
    """What the profile measured is what a tuned search plans: the targets, then the question as written."""
    from babelrag.models.llm import Completion
    from babelrag.models.registry import register_llm

    class Translating:
        name = "tuned-targets-translator"

        def complete(self, messages, json_schema=None, max_tokens=256, temperature=0.0, seed=0):  # noqa: ANN001
            return Completion('{"zh": "谁赢了超级碗？", "en": "Who won the Super Bowl?"}', 10, 5, 0.01, self.name)

    register_llm(Translating.name, Translating())
    try:
        with KnowledgeBase.open("xt", tuned_kb) as kb:
            profile = profile_for(kb, targets={"*|th": ["zh", "en"]})
            profile.cells["*|th"] = CellRule(option="as_written+kb_languages", threshold=None, n_dev=12)
            write_profile(profile, tmp_path / "xt.yaml")
            result = Searcher(kb, preset_config("tuned", {"profile": str(tmp_path), "llm": Translating.name})).search(
                Question("ใครชนะซูเปอร์โบว์ล", lang="th"))
    finally:
        register_llm(Translating.name, None)
    plan = next(s for s in result.trace.steps if s.stage == "plan")
    assert [r["label"] for r in plan.data["requests"]] == ["kb:zh", "kb:en", "as_written"]


def test_page_collapse_keeps_each_page_once(tuned_kb: str) -> None:
    """Every paragraph exists in 8 languages here: without the collapse one page fills several slots."""
    with KnowledgeBase.open("xt", tuned_kb) as kb:
        question = Question("Who won Super Bowl 50?", lang="en")
        plain = Searcher(kb, preset_config("learned", {"rerank": "learned:default"})).search(question)
        pages = Searcher(kb, preset_config("learned", {"rerank": "learned:default", "collapse": "page"})).search(question)
    assert len(set(plain.evidence.doc_ids())) < plain.passed  # repeats without it
    assert len(set(pages.evidence.doc_ids())) == pages.passed == 6  # the fixture's 6 pages, once each
    first_seen = list(dict.fromkeys(plain.evidence.doc_ids()))
    assert pages.evidence.doc_ids()[:len(first_seen)] == first_seen  # each page at its best passage's place


def test_training_candidates_rank_path_languages_per_cell() -> None:
    from babelrag.tune.training import Candidates

    # one Thai question, three paths: th finds the gold at rank 2, zh at rank 1, en never
    labels = np.array([0, 1, 1, 0, 0, 0, 0], dtype=float)
    candidates = Candidates(np.zeros((7, len(FEATURES))), labels, np.zeros(7, dtype=int),
                            np.array([0, 0, 1, 1, 2, 2, 2]), np.array(["th", "th", "zh", "zh", "en", "en", "en"], dtype=object),
                            [GoldenQuestion(id="q", question="คำถาม", lang="th", kb="k", gold_pages=("p",))], ["q"])
    assert candidates.best_paths(2) == {("*", "th"): ["zh", "th"]}


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
    # and the other way round: a German gold page with its keywords beats every German peer and stays in the top
    # three; pages that stand out among their own language's peers (the English one 0.07 above them) may come
    # first. That is the learned trade of gold-in-Lq for gold-elsewhere, measured on test articles (MRR, in Lq /
    # elsewhere): scattered 0.923 / 0.783 against hybrid's 0.992 / 0.308, mixed 0.888 / 0.757 against 0.949 / 0.283
    native = ranked(_path("de", gold=("de", 0.86, 12.0), distractor=("en", 0.83, 0.0)), "de")
    assert "gold" in native[:3]
    assert native.index("gold") < min(native.index(f"same{i}") for i in range(20))
    # what the z-score hybrid order did with the first path: the keyword match came first
    z = lambda v: (np.array(v) - np.mean(v)) / np.std(v)  # noqa: E731
    hybrid = z([h.signals["cosine"] for h in cross]) + \
        0.5 * z([h.signals.get("bm25", 0.0) for h in cross])
    assert cross[int(np.argmax(hybrid))].passage.id == "distractor"


def test_each_paths_top_hit_is_its_best_scored_row() -> None:
    from babelrag.tune.fitting import top_of_each_path
    from babelrag.tune.training import Candidates

    candidates = Candidates(np.zeros((7, len(FEATURES))), np.zeros(7), np.array([0, 0, 0, 1, 1, 1, 1]),
                            np.array([0, 0, 1, 0, 0, 0, 1]), np.array(["de"] * 7, dtype=object), [], [])
    scores = np.array([0.2, 0.9, 0.5, 0.1, 0.7, 0.7, 0.3])
    assert sorted(top_of_each_path(candidates, scores)) == [1, 2, 4, 6]  # a tie keeps the first row
    none = Candidates(np.zeros((0, len(FEATURES))), np.zeros(0), np.zeros(0, dtype=int), np.zeros(0, dtype=int),
                      np.zeros(0, dtype=object), [], [])
    assert top_of_each_path(none, np.zeros(0)).shape == (0,)  # no paths, no top hits


def _gold_first(questions: int, size: int) -> np.ndarray:
    """Labels of ``questions`` paths of ``size`` candidates each, the first of each relevant."""
    return np.tile(np.r_[1.0, np.zeros(size - 1)], questions)


def _dev_candidates(labels: np.ndarray, size: int, columns: dict[str, np.ndarray], lang: str = "de",
                    text: str = "question"):
    """Dev candidates of one as-written path per question (each its own group), every feature 0 but ``columns``."""
    from babelrag.tune.training import Candidates

    questions = len(labels) // size
    rows = np.zeros((len(labels), len(FEATURES)))
    for name, values in columns.items():
        rows[:, FEATURES.index(name)] = values
    asked = [GoldenQuestion(id=f"q{i}", question=f"{text} {i}", lang=lang, kb="k", gold_pages=("p",))
             for i in range(questions)]
    return Candidates(rows, labels, np.repeat(np.arange(questions), size), np.zeros(len(labels), dtype=int),
                      np.array([lang] * len(labels), dtype=object), asked, [f"g{i}" for i in range(questions)])


def test_the_shipped_model_competes_on_its_own_training_questions_only_through_the_folds_that_held_them_out() -> None:
    """On the bench's dev questions (the shipped model's own training questions) tune used to leave the shipped
    model out; its fold models, fitted by article, score each of them as a new question would be, so it competes
    there, scored by them: a shipped model whose full weights rank perfectly but whose folds rank backwards gets
    the folds' MRR. One fitted on these questions without fold models stays out."""
    from dataclasses import replace

    from babelrag.relevance.features import HYBRID_PRESET
    from babelrag.relevance.learn import crossfit
    from babelrag.tune.fitting import fit_selected

    questions, size = 40, 10
    labels = _gold_first(questions, size)
    signal = labels * 1.5 + np.random.default_rng(3).standard_normal(len(labels))  # the gold a little closer
    candidates = _dev_candidates(labels, size, dict.fromkeys(("dense_z", "hybrid", HYBRID_PRESET, "dense_z:cross"),
                                                             signal))
    rows, asked = candidates.rows, candidates.asked
    shipped = crossfit(rows, labels, candidates.row_groups(), candidates.group_texts(), candidates.path_keys(),
                       {"name": "shipped"}, features=("dense_z",))
    backwards = replace(shipped, folds=tuple(replace(fold, coef=-fold.coef) for fold in shipped.folds))
    _, report = fit_selected(candidates, {}, backwards, texts=candidates.texts)
    assert "shipped_left_out" not in report and report["shipped_out_of_fold"].startswith(
        f"the shipped model was fitted on {questions} of these questions")
    assert report["cv_mrr"]["shipped"] < 0.5 < report["cv_mrr"]["hybrid"]  # the folds' order, not the full model's
    _, honest = fit_selected(candidates, {}, shipped, texts=candidates.texts)
    assert honest["cv_mrr"]["shipped"] > 0.6
    # each question by the fold that held it out; a translation the model never saw by its sibling's fold
    from babelrag.tune.fitting import held_out_scores

    sibling = GoldenQuestion(id="q0-sv", question="fråga 0", lang="sv", kb="k", gold_pages=("p",))
    first = candidates.question == 0  # the sibling's candidates: the first question's again
    with_sibling = replace(candidates, rows=np.vstack([rows, rows[first]]), labels=np.r_[labels, labels[first]],
                           question=np.r_[candidates.question, np.full(size, questions)],
                           path=np.r_[candidates.path, candidates.path[first]],
                           path_lang=np.r_[candidates.path_lang, candidates.path_lang[first]],
                           asked=[*asked, sibling], groups=[*candidates.groups, "g0"])
    scores = held_out_scores(shipped, with_sibling)
    for number, question in enumerate(with_sibling.asked):
        rows = with_sibling.question == number
        fold = shipped.fold_of[question_hash(asked[0].question if question is sibling else question.question)]
        assert scores[rows] == pytest.approx(shipped.folds[fold].predict(with_sibling.rows[rows], np.zeros(size)))
    no_folds = replace(shipped, folds=(), fold_of={})
    _, report = fit_selected(candidates, {}, no_folds, texts=candidates.texts)
    assert "shipped" not in report["cv_mrr"] and report["shipped_left_out"].startswith(
        f"the shipped model was fitted on {questions} of these")


def test_tune_lets_the_shipped_model_compete_only_on_the_embedder_it_was_fitted_on() -> None:
    """Its weights read the embedded default's cosines: on a KB built by another embedder it would be scored on
    numbers it never saw, win by the one-error rule, and be refused at search time after the whole fit."""
    from types import SimpleNamespace

    from babelrag.relevance.features import HYBRID_PRESET
    from babelrag.tune.fitting import fit_selected
    from babelrag.tune.runner import shipped_for

    def kb_built_by(fingerprint: str) -> KnowledgeBase:
        return SimpleNamespace(embedder=SimpleNamespace(fingerprint=lambda: fingerprint))  # type: ignore[return-value]

    assert shipped_for(kb_built_by(default_model().meta["embedder"])) is default_model()
    assert shipped_for(kb_built_by("openai:text-embedding-3-small")) is None
    labels = _gold_first(40, 10)
    signal = labels + np.random.default_rng(7).standard_normal(len(labels))
    candidates = _dev_candidates(labels, 10, dict.fromkeys(("dense_z", "dense_z:cross", HYBRID_PRESET), signal))
    model, report = fit_selected(candidates, {"name": "refit"}, None)
    assert "shipped" not in report["cv_mrr"] and report["variant"] in ("hybrid", "full")
    assert "another embedder" in report["shipped_left_out"] and model is not default_model()


def test_a_fold_left_unfitted_is_counted_and_a_bug_in_a_fit_stops_the_selection(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A fold whose training side has nothing to calibrate on is skipped for every model, and the report says so; any
    other error inside a fit is a bug, and no fold hides it."""
    from babelrag.relevance import learn
    from babelrag.relevance.calibration import monotone_logistic
    from babelrag.relevance.features import HYBRID_PRESET
    from babelrag.tune import fitting

    labels = _gold_first(40, 10)
    signal = labels + np.random.default_rng(7).standard_normal(len(labels))
    candidates = _dev_candidates(labels, 10, dict.fromkeys(("dense_z", "dense_z:cross", HYBRID_PRESET), signal))
    assert fitting.fit_selected(candidates, {}, None)[1]["folds"] == 5
    real_fit, calls = fitting.fit, []

    def first_fold_uncalibrated(rows, labels, *args, **kwargs):
        calls.append(len(rows))
        # the first fold's first fit: a training side with no relevant candidate (the fold's other fit is not tried)
        return real_fit(rows, np.zeros_like(labels) if len(calls) == 1 else labels, *args, **kwargs)
    monkeypatch.setattr(fitting, "fit", first_fold_uncalibrated)
    report = fitting.fit_selected(candidates, {}, None)[1]
    assert (report["folds"], report["folds_unfitted"]) == (4, 1)
    monkeypatch.setattr(fitting, "fit", real_fit)

    def shape_bug(inputs, *args, **kwargs):
        return monotone_logistic(inputs[:, :0] @ np.ones(3), *args, **kwargs)
    monkeypatch.setattr(learn, "monotone_logistic", shape_bug)
    with pytest.raises(ValueError, match="mismatch") as error:
        fitting.fit_selected(candidates, {}, None)
    assert not isinstance(error.value, ConfigError)


def test_a_question_whose_search_found_nothing_counts_zero_for_every_model() -> None:
    """It is a dev question no model could answer: leaving it out would flatter every held-out MRR."""
    from dataclasses import replace

    from babelrag.relevance.features import HYBRID_PRESET
    from babelrag.tune.fitting import VARIANTS, _subset, held_out_ranks

    labels = _gold_first(40, 10)
    candidates = _dev_candidates(labels, 10, dict.fromkeys(("dense_z", "dense_z:cross", HYBRID_PRESET),
                                                           labels + 0.01))
    found = _subset(candidates, np.flatnonzero(~np.isin(candidates.question, [3, 7])))
    full = held_out_ranks(candidates, {"hybrid": VARIANTS["hybrid"]})
    held = held_out_ranks(replace(found, asked=candidates.asked, groups=candidates.groups),
                          {"hybrid": VARIANTS["hybrid"]})
    assert full.mrr()["hybrid"] == pytest.approx(1.0) and held.mrr()["hybrid"] == pytest.approx(38 / 40)
    assert sorted(held.groups) == sorted(full.groups) and held.folds == full.folds == 5


def test_tunes_one_feature_variant_is_the_hybrid_presets_own_order() -> None:
    """On SweFAQ the hybrid preset's fused order (0.755 MRR on test) beats the order recomputed from the candidates'
    cosines (0.740), and ``tune`` kept its one-feature variant on the recomputed one: a dev tie with the shipped model
    then cost 1.5 points. The variant reads the preset's order: here the recomputed column is noise."""
    from babelrag.relevance.features import HYBRID_PRESET
    from babelrag.tune.fitting import VARIANTS, held_out_ranks

    size = 8
    labels = _gold_first(30, size)
    candidates = _dev_candidates(labels, size, {
        HYBRID_PRESET: labels + 0.01 * (np.arange(len(labels)) % size),
        "hybrid": np.random.default_rng(0).standard_normal(len(labels))}, lang="sv", text="fråga")  # hybrid: noise
    assert held_out_ranks(candidates, {"hybrid": VARIANTS["hybrid"]}).mrr()["hybrid"] == pytest.approx(1.0)


def test_tune_keeps_the_simplest_model_within_one_standard_error_of_the_best() -> None:
    """On a few dozen dev questions a refit's cross-validated lead of 2 points is noise (quick bench: +1.9 on dev,
    -3.0 on test, scattered layout): the model least shaped by the KB's questions is kept unless the best beats it
    by more than one standard error of the paired difference, counted over groups (a question's translations do
    not shrink it; groups of any size)."""
    from babelrag.tune.fitting import HeldOut, one_error_choice

    assert SIMPLEST_FIRST == ("shipped", "hybrid", "full")
    shipped = np.tile([1.0, 0.5, 1.0, 0.0, 1.0], 8)  # 40 questions in 20 groups of two (a question, a translation)
    groups = np.repeat(np.arange(20), 2).astype(str).astype(object)
    noisy = shipped.copy()
    noisy[[3, 13, 23]] = 1.0  # three questions better, four worse: +0.025 on average, well within noise
    noisy[[1, 11, 21, 31]] = 0.0
    hybrid = shipped * 0.5
    held = HeldOut(groups, {"shipped": shipped, "hybrid": hybrid, "full": noisy})
    gap, error = held.shortfall("shipped", "full")
    per_group = (noisy - shipped).reshape(20, 2).mean(axis=1)  # equal groups: the plain error of group means
    assert gap == pytest.approx(per_group.mean()) and error == pytest.approx(per_group.std(ddof=1) / np.sqrt(20))
    assert gap < 0.9 * error and one_error_choice(held, SIMPLEST_FIRST) == ("shipped", "full")
    clearly = np.clip(shipped + 0.25, 0.0, 1.0)  # better in most groups
    assert one_error_choice(HeldOut(groups, {"shipped": shipped, "hybrid": hybrid, "full": clearly}),
                            SIMPLEST_FIRST) == ("full", "full")
    # the same questions counted as 40 independent ones would make the error smaller: groups, not rows
    assert error > HeldOut(np.arange(40).astype(str).astype(object), held.ranks).shortfall("shipped", "full")[1]
    tie = HeldOut(groups, {"shipped": shipped, "hybrid": shipped.copy(), "full": shipped * 0.9})
    assert one_error_choice(tie, SIMPLEST_FIRST) == ("shipped", "shipped")
    # groups of unequal size (articles): the error of the mean over questions, each group one sample
    uneven = np.array(["a"] * 10 + ["b", "c", "d", "e", "f"], dtype=object)
    better = np.r_[np.ones(10), np.zeros(5)]
    gap, error = HeldOut(uneven, {"shipped": np.zeros(15), "full": better}).shortfall("shipped", "full")
    totals = np.array([10 * (1 - 2 / 3)] + [-2 / 3] * 5)
    assert gap == pytest.approx(2 / 3) and error == pytest.approx(np.sqrt(6 / 5 * (totals ** 2).sum()) / 15)
    with pytest.raises(ValueError, match="2 clusters"):
        HeldOut(np.array(["a", "a"], dtype=object), {"x": np.ones(2), "y": np.zeros(2)}).shortfall("y", "x")


def test_fit_selected_returns_the_one_error_choice_and_refits_only_that(monkeypatch: pytest.MonkeyPatch) -> None:
    """The selection's wiring: the shipped model itself when the refit's lead is within one error (its report says
    what led and by how much), the refit when the lead is beyond it."""
    from babelrag.relevance.features import HYBRID_PRESET
    from babelrag.relevance.learn import crossfit
    from babelrag.tune import fitting

    questions, size = 40, 10
    labels = _gold_first(questions, size)
    signal = labels + np.random.default_rng(5).standard_normal(len(labels))
    candidates = _dev_candidates(labels, size, dict.fromkeys(("dense_z", "dense_z:cross", HYBRID_PRESET), signal))
    shipped = crossfit(candidates.rows, labels, candidates.row_groups(), candidates.group_texts(),
                       candidates.path_keys(), {"name": "shipped"}, features=("dense_z",))
    groups = np.array([f"g{i}" for i in range(questions)], dtype=object)
    base = np.tile([1.0, 0.5, 0.0, 1.0], 10)
    within_noise = np.r_[0.0, -0.5, 1.0, np.zeros(37)]  # one question better, one worse: +0.0125, error 0.028
    for lead, expected in ((within_noise, "shipped"), (np.full(40, 0.2), "full")):
        ranks = {"shipped": base, "hybrid": base * 0.5, "full": np.clip(base + lead, 0.0, 1.0)}
        monkeypatch.setattr(fitting, "held_out_ranks", lambda *args, ranks=ranks: fitting.HeldOut(groups, ranks))
        model, report = fitting.fit_selected(candidates, {"name": "refit"}, shipped)
        assert report["variant"] == expected and report["best"] == "full"
        assert (model is shipped) == (expected == "shipped") and set(report["below_best"]) == {"shipped", "hybrid"}
