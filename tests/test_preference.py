"""Language-preference analysis: MLRS arithmetic, the ridge calibration removing a planted prior, the
gold-ratio sensitivity check, and the whole analysis on real XQuAD paragraphs."""
from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from babelrag.analysis.delp import Priors, calibrate, prior_correlations, variability
from babelrag.analysis.mlrs import random_reference, rank_shift
from babelrag.evaluate.golden import GoldenQuestion

from conftest import XQUAD_LANGS, need_llm


def test_rank_shift_follows_the_definition() -> None:
    # initial a b c d (c, d not in Lq); after re-scoring c jumps to 1st, d stays last
    assert rank_shift(["a", "b", "c", "d"], ["c", "a", "b", "d"], {"c", "d"}) == pytest.approx(100 * 2 / (2 + 3))
    assert rank_shift(["a", "b"], ["b", "a"], set()) == 0.0  # no D_diff: 0 by definition
    assert rank_shift(["x", "y"], ["y", "x"], {"x"}) == 0.0  # rank 1 cannot rise: Δmax = 0


def test_random_rescoring_matches_the_reference() -> None:
    rng = np.random.default_rng(0)
    ids = [str(i) for i in range(10)]
    values = [rank_shift(ids, list(rng.permutation(ids)), set(ids)) for _ in range(4000)]
    assert np.mean(values) == pytest.approx(random_reference(10), abs=1.0)


LANGS = ["en", "ko", "zh", "fr", "ja", "de"]


def planted(seed: int = 0) -> tuple[dict, Priors]:
    """A true preference (the diagonal) plus a planted exposure effect the calibration must remove."""
    rng = np.random.default_rng(seed)
    pairs = list(itertools.product(LANGS, LANGS))
    p_ret = {p: float(rng.uniform(0.01, 0.6)) for p in pairs}
    priors = Priors(p_ret=p_ret, p_db={d: 1 / 6 for d in LANGS}, length={d: 700.0 for d in LANGS},
                    p_gold={p: 0.5 for p in pairs}, p_cult={d: 1 / 6 for d in LANGS})
    scores = {p: 40 + 6 * (p[0] == p[1]) + 8 * np.log(p_ret[p]) + rng.normal(0, 0.3) for p in pairs}
    return scores, priors


def test_ridge_calibration_removes_a_planted_prior() -> None:
    scores, priors = planted()
    calibration = calibrate(scores, priors, lam=0.01)
    correlations = prior_correlations(calibration, priors)
    assert correlations["p_ret"]["before_log"] > 0.9 and abs(correlations["p_ret"]["after_log"]) < 0.1
    assert calibration.beta[1] == pytest.approx(8, abs=0.5)  # log p_ret weight recovered
    assert calibration.beta[6] == pytest.approx(6, abs=0.5)  # same-language indicator exposed in β
    assert np.mean(list(calibration.debiased.values())) == pytest.approx(calibration.mean, abs=0.01)  # re-centred


def test_variability_compares_the_series_pair_by_pair() -> None:
    rng = np.random.default_rng(3)
    moving = {(q, d): list(rng.normal(0, 5, 6)) for q in ("en", "ko") for d in ("en", "ko")}
    steady = {pair: [v / 4 for v in values] for pair, values in moving.items()}
    calmer = variability(moving, steady, permutations=2000)
    assert calmer["delp"]["std"] == pytest.approx(calmer["mlrs"]["std"] / 4) and calmer["pairs"] == 4
    same = variability(moving, moving, permutations=2000)
    assert same["p_range"] == 1.0 and same["p_std"] == 1.0  # no difference: nothing to test


@pytest.mark.slow
def test_preference_on_real_xquad(xquad_store: str, small_xquad: list[Path], tmp_path: Path) -> None:
    from babelrag.analysis.preference import PreferenceOptions, analyze_preference
    from babelrag.analysis.report import write_preference
    from babelrag.experiments.squad import load_squad_folder
    from babelrag.kb import KnowledgeBase

    corpus = load_squad_folder(small_xquad[0].parent)
    golden = [GoldenQuestion(id=f"{q.lang}:{q.qid}", question=q.text, lang=q.lang, kb="xq", gold_pages=(q.page,),
                             tags={"qid": q.qid}) for q in corpus.questions]
    options = PreferenceOptions(targets="all", per_lang=3, translator="parallel", cultural=False, lam=1.0)
    with KnowledgeBase.open("xq", xquad_store) as kb:
        result = analyze_preference(kb, golden, options)
    assert result["questions"] == 3 * len(XQUAD_LANGS)
    assert len(result["mlrs"]) == len(XQUAD_LANGS) ** 2 and all(0 <= v <= 100 for v in result["mlrs"].values())
    assert set(result["delp"]["beta"]) >= {"log p_ret", "same language"} and "p_gold" in result["correlations"]
    for lq in XQUAD_LANGS:  # the exposure prior is a distribution over document languages per query language
        assert sum(result["priors"]["p_ret"][f"{lq}|{ld}"] for ld in XQUAD_LANGS) == pytest.approx(1.0)
        assert result["priors"]["p_gold"][f"{lq}|{lq}"] == 1.0  # xquad: every page exists in every language
    assert len(result["mlrs"]) >= 21 and not any("too few" in n for n in result["notes"])  # 64 pairs for 7 weights
    files = write_preference(result, tmp_path)
    assert files["delp"].stat().st_size > 1000 and "data:image/png;base64," in files["html"].read_text()


@pytest.mark.slow
def test_gold_sensitivity_changes_gold_for_real(xquad_store: str, small_xquad: list[Path]) -> None:
    from babelrag.analysis.preference import PreferenceOptions, analyze_preference
    from babelrag.analysis.report import preference_markdown
    from babelrag.experiments.squad import load_squad_folder
    from babelrag.kb import KnowledgeBase

    corpus = load_squad_folder(small_xquad[0].parent)
    langs = ("en", "de")
    golden = [GoldenQuestion(id=f"{q.lang}:{q.qid}", question=q.text, lang=q.lang, kb="xq", gold_pages=(q.page,),
                             tags={"qid": q.qid}) for q in corpus.questions if q.lang in langs]
    options = PreferenceOptions(targets="all", per_lang=4, translator="parallel", cultural=False,
                                sensitivity_ratios=3, sensitivity_pair=("en", "de"))
    with KnowledgeBase.open("xq", xquad_store) as kb:
        result = analyze_preference(kb, golden, options)
    s = result["sensitivity"]
    assert s["first_language_share"][0] == 0.0 and s["first_language_share"][-1] == 1.0 and s["gold_pages"] >= 1
    en, de = s["p_gold"]["en"], s["p_gold"]["de"]
    assert en[0] < en[-1] and de[0] > de[-1]  # gold really moved from one language's corpus to the other's
    assert s["pairs"] == 2 * 2  # every query language, against each language of the pair
    assert s["mlrs"]["range"] > 0  # MLRS was measured again on a changed corpus, not copied across ratios
    assert 0 < s["p_range"] <= 1 and "Gold-availability sensitivity (en vs de)" in preference_markdown(result)
    assert any("too few" in n for n in result["notes"])  # 2 query × 8 document languages: 16 pairs, 7 weights


@pytest.mark.slow
def test_cultural_prior_and_gold_report(xquad_store: str, small_xquad: list[Path]) -> None:
    from babelrag.analysis.gold import gold_availability, gold_markdown
    from babelrag.analysis.preference import PreferenceOptions, analyze_preference
    from babelrag.experiments.squad import load_squad_folder
    from babelrag.kb import KnowledgeBase

    llm = need_llm()
    corpus = load_squad_folder(small_xquad[0].parent)
    golden = [GoldenQuestion(id=f"{q.lang}:{q.qid}", question=q.text, lang=q.lang, kb="xq", gold_pages=(q.page,),
                             tags={"qid": q.qid}) for q in corpus.questions if q.lang in ("en", "de")]
    with KnowledgeBase.open("xq", xquad_store) as kb:
        result = analyze_preference(kb, golden, PreferenceOptions(per_lang=1, translator="parallel", llm=llm))
        report = gold_availability(kb, golden[:6], k=10)
    classified = result["questions"] - sum(f.startswith("classifier") for f in result["failures"])
    assert all(abs(v * classified - round(v * classified)) < 1e-9 for v in result["priors"]["p_cult"].values())
    assert result["llm"]["llm_calls"] >= result["questions"]  # one classifier call (at least) per question
    assert result["notes"] and "DeLP needs the MLRS matrix" in result["notes"][0]
    rows = report["by_question_language"]
    assert sum(row["questions"] for row in rows.values()) == 6 and all(row["any"] == 1.0 for row in rows.values())
    assert all(f"| {lang} | {row['questions']} | 1.00 |" in gold_markdown(report) for lang, row in rows.items())


@pytest.mark.slow
def test_generator_preference_from_the_same_evidence(xquad_store: str) -> None:
    from babelrag.analysis.generator_preference import generator_preference
    from babelrag.kb import KnowledgeBase

    question = GoldenQuestion(id="q", question="Who won Super Bowl 50?", lang="en", kb="xq",
                              gold_pages=("Super_Bowl_50#0",))
    from babelrag.models.llm import build_llm
    from babelrag.models.registry import register_llm

    model, asked = build_llm(need_llm()), []

    class Watched:  # the real model; the prompts it was given are kept
        name, slots = f"watched-{model.name}", 1

        def complete(self, messages, json_schema=None, max_tokens=256, temperature=0.0, seed=0):  # noqa: ANN001, ANN201
            asked.append(messages[0]["content"])
            return model.complete(messages, json_schema, max_tokens, temperature, seed)

        def stream(self, messages, on_text, max_tokens=256, temperature=0.0, seed=0):  # noqa: ANN001, ANN201
            asked.append(messages[0]["content"])
            return model.stream(messages, on_text, max_tokens, temperature, seed)

    register_llm("watched", Watched())
    try:
        with KnowledgeBase.open("xq", xquad_store) as kb:
            result = generator_preference(kb, [question], ["en", "de"], "watched", k=2, answer_tokens=24)
            answers = result["answers"][0]["answers"]
            vectors = kb.embedder.embed([answers["en"], answers["de"]], "passage")
    finally:
        register_llm("watched", None)
    # two generations, each asked in its own language (whether a 0.5B model obeys is what is measured)
    assert len(asked) == 2 and asked[0] != asked[1] and all(answers.values())
    cross = float(vectors[0] @ vectors[1])  # with two languages, each one's preference is their one cosine
    assert result["preference"] == pytest.approx({"en": cross, "de": cross}, abs=1e-5)
    assert result["similarity"]["en|de"] == pytest.approx(cross, abs=1e-5)
