"""`babelrag tune` end to end on real XQuAD paragraphs with the real engine: profiles applied, refused and
kept out of the headline, bad golden sets refused, the tune → store → serve loop, measured KB-language paths and
page collapse."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from babelrag.config import preset_config
from babelrag.errors import ConfigError, IndexMismatch, InputError
from babelrag.evaluate.golden import GoldenQuestion
from babelrag.ingest.pipeline import index_sources
from babelrag.ingest.pivot_copies import make_pivot_copies
from babelrag.kb import KnowledgeBase
from babelrag.relevance.features import FEATURES
from babelrag.relevance.model import default_model, question_hash
from babelrag.retrieve.pipeline import Searcher
from babelrag.strategies.tuned import OPTIONS, CellRule, Profile, Tuned, load_profile
from babelrag.tune.choose import choose
from babelrag.tune.fitting import MIN_REFIT_ARTICLES, SIMPLEST_FIRST
from babelrag.tune.runner import TuneOptions, tune, write_profile
from babelrag.types import Question

from conftest import XQUAD_LANGS, ProfessionalTranslations, dev_rows


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


def test_with_few_dev_articles_tune_tries_no_full_refit_and_its_profile_and_the_bench_say_so(
        tuned_kb: str, small_xquad: list[Path], tmp_path: Path) -> None:
    """A sample's dev questions from two articles: no refit of every feature is tried (``MIN_REFIT_ARTICLES``), only
    the one-weight hybrid refit competes with the shipped model, and the profile, the summary and the bench's notes
    say so, instead of a relevance model that silently stayed as it was."""
    from babelrag.experiments.runner import fit_profiles
    from babelrag.tune.fitting import dev_articles

    golden = [q for q in golden_for(small_xquad, "xt") if q.tags["split"] == "dev" and q.lang in ("en", "de")]
    notes = fit_profiles(golden, ["xt"], tuned_kb, tmp_path, {str(tmp_path / "no-llm")}, None, 1)
    assert len({q.tags["qid"] for q in golden}) >= TuneOptions().min_dev
    articles = dev_articles(golden)
    assert 1 < articles < MIN_REFIT_ARTICLES
    said = f"not tried: the dev questions come from {articles} articles, and it competes from {MIN_REFIT_ARTICLES}"
    written = yaml.safe_load((tmp_path / "no-llm" / "xt.yaml").read_text())
    selection = written["relevance"]["selection"]
    assert selection["full_refit"] == said and set(selection["cv_mrr"]) == {"shipped", "hybrid"}
    assert notes == [f"xt (no-llm): relevance model {selection['variant']}, a refit of every feature {said}"]
    assert (written["model"]["meta"]["name"] == "default") == (selection["variant"] == "shipped")
    assert written["budget"]["min_refit_articles"] == MIN_REFIT_ARTICLES


def test_the_bench_gives_an_index_without_dev_questions_a_profile_tuned_on_nothing(
        tuned_kb: str, small_xquad: list[Path], tmp_path: Path) -> None:
    from babelrag.experiments.runner import fit_profiles

    only_test = [q.model_copy(update={"tags": {**q.tags, "split": "test"}}) for q in golden_for(small_xquad, "xt")]
    notes = fit_profiles(only_test, ["xt"], tuned_kb, tmp_path, {str(tmp_path / "no-llm")}, None, 1)
    assert len(notes) == 1 and "no dev question in this sample" in notes[0]
    written = yaml.safe_load((tmp_path / "no-llm" / "xt.yaml").read_text())  # says what it was tuned within, on what
    assert written["budget"]["max_llm_calls"] == 0.0 and written["budget"]["dev_questions"] == 0
    assert written["budget"]["selection_check"] is True and written["tuned_on"] == []
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
        result = tune(kb, golden, TuneOptions(cell_min=20, min_refit_articles=0))  # a small sample: refits compete
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
        assert stored["budget"]["dev_questions"] == result.questions == len(
            {q.tags["qid"] for q in golden if q.tags["split"] == "dev"})  # a question and its translations once
    with KnowledgeBase.open("xt", tuned_kb) as kb:  # stored: a new process finds it
        name = kb.manifest.relevance["name"]
        assert name == ("default" if result.fit["variant"] == "shipped" else "xt-tuned")
        searcher = Searcher(kb, preset_config("tuned"))
        result = searcher.search(Question("Wer hat den Super Bowl 50 gewonnen?", lang="de"))
        assert result.evidence.scorer == f"learned:{name}" and result.evidence.hits
        assert 0.0 <= result.evidence.hits[0].score <= 1.0



@pytest.mark.parametrize(("flags", "checked", "refit_from"), [
    ((), True, MIN_REFIT_ARTICLES), (("--no-selection-check",), False, MIN_REFIT_ARTICLES),
    (("--selection-check", "--min-refit-articles", "40"), True, 40)])
def test_the_cli_hands_the_selection_check_setting_to_tune(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                           flags: tuple[str, ...], checked: bool,
                                                           refit_from: int) -> None:
    """`babelrag tune --no-selection-check` and `--min-refit-articles` reach the options tune chooses with (the KB,
    the golden set and tune itself stood in for: only the wiring is under test)."""
    import contextlib

    from typer.testing import CliRunner

    import babelrag.evaluate.golden
    import babelrag.tune.runner
    from babelrag.cli import app

    class Reached(Exception):
        pass
    seen: list[TuneOptions] = []

    def stand_in(kb: object, golden: object, options: TuneOptions) -> None:
        seen.append(options)
        raise Reached

    monkeypatch.setattr(babelrag.tune.runner, "tune", stand_in)
    monkeypatch.setattr(babelrag.evaluate.golden, "load_golden", lambda path: [])
    monkeypatch.setattr(KnowledgeBase, "open", lambda *args, **kwargs: contextlib.nullcontext(None))
    result = CliRunner().invoke(app, ["tune", "--kb", "demo", "--golden", str(tmp_path / "g.jsonl"), *flags])
    assert isinstance(result.exception, Reached), result.output
    assert [(options.selection_check, options.min_refit_articles) for options in seen] == [(checked, refit_from)]

@pytest.mark.slow
def test_tune_measures_the_pivot_copies_only_where_the_kb_has_them(tmp_path: Path, small_xquad: list[Path],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import babelrag.tune.runner

    store = str(tmp_path / "store")
    index_sources("xc", [str(p) for p in small_xquad], store)
    golden = golden_for(small_xquad, "xc")
    options = TuneOptions(cell_min=20, fit_model=False, store_with_kb=False)
    checks: list[bool] = []  # what each tuning asked the choice for

    def spy(*args, **kwargs):
        checks.append(kwargs["selection_check"])
        return choose(*args, **kwargs)
    monkeypatch.setattr(babelrag.tune.runner, "choose", spy)
    with KnowledgeBase.open("xc", store) as kb:
        assert set(tune(kb, golden, options).options) == {"as_written"}
        make_pivot_copies(kb, ProfessionalTranslations(kb.collection.scroll()))
        checked = tune(kb, golden, options).profile
        unchecked = tune(kb, golden, replace(options, selection_check=False))  # `tune --no-selection-check`
    measured = unchecked.options
    assert checks == [True, True, False]
    assert checked.budget["selection_check"] is True and unchecked.profile.budget["selection_check"] is False
    rules = (unchecked.profile.global_rule, *unchecked.profile.kbs.values(), *unchecked.profile.cells.values())
    assert not any(rule.selection_check for rule in rules)
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


def test_a_rank_fused_option_gets_no_threshold_and_its_searches_none(tuned_kb: str, tmp_path: Path) -> None:
    plain = dev_rows({"SE|sv": (200, 0.5, 0)})
    fused = dev_rows({"SE|sv": (200, 0.9, 0)})
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


def test_training_candidates_rank_path_languages_per_cell() -> None:
    from babelrag.tune.training import Candidates

    # one Thai question, three paths: th finds the gold at rank 2, zh at rank 1, en never
    labels = np.array([0, 1, 1, 0, 0, 0, 0], dtype=float)
    candidates = Candidates(np.zeros((7, len(FEATURES))), labels, np.zeros(7, dtype=int),
                            np.array([0, 0, 1, 1, 2, 2, 2]), np.array(["th", "th", "zh", "zh", "en", "en", "en"], dtype=object),
                            [GoldenQuestion(id="q", question="คำถาม", lang="th", kb="k", gold_pages=("p",))], ["q"])
    assert candidates.best_paths(2) == {("*", "th"): ["zh", "th"]}


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


def test_clear_path_rates_count_strictly_above_and_ranks_below_ties() -> None:
    """Eight as-written paths: two cross-lingual clear ones (the gold page in another language, 0.05 closer than
    the question's own-language pages, one of which has the best keyword match), two native clear ones (the gold
    page top by cosine and by keywords), and four that are neither (a gold page not the closest; one only 0.01
    closer than a same-language page; one whose own keyword match is the best; a native one whose is not)."""
    from babelrag.tune.fitting import clear_path_rates, clear_paths
    from babelrag.tune.training import Candidates

    # cross a | cross b | native a | native b | neither | too close | keyword | native, not by keywords
    dense = [0.90, 0.85, 0.80, 0.90, 0.85, 0.90, 0.80, 0.70, 0.60, 0.90, 0.80, 0.70, 0.60, 0.70, 0.90, 0.90, 0.89,
             0.90, 0.80, 0.90, 0.80]
    keyword = [0.0, 1.0, 0.2, 0.0, 1.0, 1.0, 0.5, 0.2, 0.1, 1.0, 0.5, 0.2, 0.1, 0.0, 1.0, 0.0, 1.0, 1.0, 0.5, 0.5, 1.0]
    same = [0, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 0, 1, 0, 1, 1, 1]
    labels = [1, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 0, 1, 0, 1, 0]
    question = [0, 0, 0, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7]
    rows = np.zeros((21, len(FEATURES)))
    for name, column in (("dense", dense), ("bm25_norm", keyword), ("same_lang", same)):
        rows[:, FEATURES.index(name)] = column
    candidates = Candidates(rows, np.array(labels, dtype=float), np.array(question), np.zeros(21, dtype=int),
                            np.array(["de"] * 21, dtype=object), [], [])
    cross, native = clear_paths(candidates)
    assert [gold for gold, _ in cross] == [0, 3] and [gold for gold, _ in native] == [5, 9]
    # cross a: the gold page strictly above; cross b: tied with a same-language page, which is not above.
    # native a: tied with another page for first, still first; native b: three pages above it, not in the top three
    scores = np.array([0.9, 0.5, 0.8, 0.6, 0.6, 0.7, 0.7, 0.1, 0.1, 0.2, 0.3, 0.4, 0.5, 0.0, 0.0, 0.0, 0.9, 0.0, 0.9, 0.0, 0.9])
    rates = clear_path_rates(candidates, scores)
    assert rates == {"cross-lingual paths": 2, "gold above": 0.5, "native paths": 2, "first": 0.5, "top three": 0.5}
    cross_only = Candidates(rows[:5], np.array(labels[:5], dtype=float), np.array(question[:5]), np.zeros(5, dtype=int),
                            np.array(["de"] * 5, dtype=object), [], [])
    nothing_native = clear_path_rates(cross_only, scores[:5])
    assert nothing_native["native paths"] == 0 and np.isnan(nothing_native["first"])
