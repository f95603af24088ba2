"""Query strategies: KB-language targets, DELTA's fused query, merge rules, and each strategy end to end
with the real small model on a small real KB."""
from __future__ import annotations

import json

import pytest

from babelrag.config import DeltaConfig, parse_overrides, preset_config
from babelrag.errors import ConfigError
from babelrag.ingest.pipeline import index_sources
from babelrag.kb import KnowledgeBase
from babelrag.retrieve.pipeline import Searcher
from babelrag.strategies.delta import AnchorBundle, fuse_query
from babelrag.strategies.scope import kb_languages
from babelrag.strategies.locale import CulturalCue
from babelrag.strategies.unaccented import without_accents
from babelrag.types import Question

from conftest import a_manifest, need_llm

LANGUAGES = {"all": {"sv": 30, "en": 25, "pl": 10}, "global": {"en": 3},
             "countries": {"SE": {"sv": 20, "en": 5}, "PL": {"pl": 10, "en": 10}, "US": {"en": 7}}}
MANIFEST = a_manifest(languages=LANGUAGES)


def test_kb_languages_come_from_the_kb_side() -> None:
    assert kb_languages(MANIFEST, "SE", "en") == ["en", "sv"]  # pivot first, then by passage count
    assert kb_languages(MANIFEST, "PL", "en") == ["en", "pl"]
    assert kb_languages(MANIFEST, "US", "en") == ["en"]  # an Indonesian question still gets only English
    assert kb_languages(MANIFEST, None, "en") == ["en", "sv", "pl"]
    assert kb_languages(MANIFEST, "SE", "de") == ["sv", "en"]  # a pivot the KB lacks is never added
    tied = a_manifest(languages={"all": {lang: 120 for lang in ("ar", "de", "en", "th", "zh")}})
    assert kb_languages(tied, None, "en", prefer="th")[:2] == ["en", "th"]  # not en + ar + de for a Thai question
    overridden = a_manifest(languages=LANGUAGES, language_overrides={"countries": {"SE": ["sv"]}})
    assert kb_languages(overridden, "SE", "en") == ["sv"]


def test_tied_kb_languages_are_ordered_by_measured_gains_not_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """A KB whose languages hold equal shares (a scattered KB): after the pivot and the question's own language,
    the languages whose translated paths found the gold best on the shipped dev questions come first."""
    from babelrag.strategies import scope

    measured = {"ar": 0.61, "de": 0.83, "th": 0.72, "zh": 0.55}
    model = scope.default_model()
    monkeypatch.setattr(scope, "default_model", lambda: type(model)(
        model.features, model.mean, model.scale, model.coef, model.intercept, {**model.meta, "path_lang_mrr": measured}))
    tied = a_manifest(languages={"all": {lang: 15 for lang in ("ar", "de", "en", "th", "zh")}})
    assert kb_languages(tied, None, "en") == ["en", "de", "th", "ar", "zh"]
    assert kb_languages(tied, None, "en", prefer="zh")[:3] == ["en", "zh", "de"]
    assert "path_lang_mrr" in model.meta  # the shipped model carries what was measured


def cue(y: bool, c: float) -> CulturalCue:
    return CulturalCue(country_or_region="South Korea", cultural_language="ko", is_culture_specific=y, confidence=c)


BUNDLE = AnchorBundle(en_title="South Korea at the Olympics", local_title="대한민국의 올림픽",
                      aliases_en=["Olympics in South Korea", "South Korean Olympic Games"],
                      aliases_local=["대한민국 올림픽", "한국 올림픽"], extra_disambig="Last Olympic Games in South Korea")


def test_delta_case_study_repetition() -> None:
    fused = fuse_query("when was the last time south korea had the olympics", "언제 마지막으로 대한민국이 올림픽을 했었나요",
                       "ko", cue(True, 0.93), BUNDLE, "ko", DeltaConfig(max_chars=5000))
    assert (fused.counts["r_local"], fused.counts["r_glob"], fused.counts["boost"]) == (3, 1, 1)
    pieces = fused.text.split(" | ")
    assert [p.split("]")[0] + "]" for p in pieces] == (["[GLOB]"] + ["[LOCAL:ko]"] * 3 + ["[TITLE_BRIDGE]"] * 2 +
                                                        ["[ALIASES:ko]"] * 2 + ["[ALIASES:GLOB]", "[LOCALE_HINT]"])
    assert pieces[4] == "[TITLE_BRIDGE] South Korea at the Olympics / 대한민국의 올림픽"
    assert pieces[-1] == "[LOCALE_HINT] South Korea Last Olympic Games in South Korea"
    assert ("언제 마지막으로 대한민국이 올림픽을 했었나요", "ko") in fused.segments and not any("[" in t for t, _ in fused.segments)


@pytest.mark.parametrize("y, c, expected", [(True, 0.5, (1, 2, 0)), (True, 0.65, (2, 1, 0)), (True, 0.75, (2, 1, 1)),
                                            (True, 0.9, (3, 1, 1)), (False, 0.99, (1, 2, 0))])
def test_delta_repetition_policy(y: bool, c: float, expected: tuple[int, int, int]) -> None:
    counts = fuse_query("q", "q local", "ko", cue(y, c), None, "ko", DeltaConfig()).counts
    assert (counts["r_local"], counts["r_glob"], counts["boost"]) == expected


def test_delta_dedup_rules_and_cap() -> None:
    same_title = BUNDLE.model_copy(update={"local_title": "South Korea at the Olympics",
                                           "aliases_local": ["Olympics in South Korea", "South Korean Olympic Games"]})
    fused = fuse_query("q", "질문", "ko", cue(False, 0.1), same_title, "ko", DeltaConfig())
    assert "[TITLE_BRIDGE] South Korea at the Olympics |" in fused.text + " |"  # rule (i): once
    assert "[ALIASES:ko]" not in fused.text and "[ALIASES:GLOB]" in fused.text  # rule (ii)
    no_title = BUNDLE.model_copy(update={"en_title": None, "local_title": None, "aliases_en": [], "aliases_local": []})
    assert "[TITLE_BRIDGE]" not in fuse_query("q", "질문", "ko", cue(True, 0.9), no_title, "ko", DeltaConfig()).text
    long = fuse_query("x" * 400, "y" * 400, "ko", cue(True, 0.95), BUNDLE, "ko", DeltaConfig())
    assert len(long.text) == 900 and "[LOCAL:ko]" in long.text  # cut after joining, LOCAL kept
    english = dict(q_glob="who won", q_local="who won", lang="en", cue=cue(False, 0.2), bundle=None, anchor_lang="en")
    assert "[LOCAL:en]" in fuse_query(**english, options=DeltaConfig(english_mode="paper")).text
    assert "[LOCAL:en]" not in fuse_query(**english, options=DeltaConfig(english_mode="dedupe")).text


def test_merge_and_threshold_rules() -> None:
    with pytest.raises(ConfigError, match="max-merging paths needs one score scale"):
        preset_config("chat", {"rerank": "none", "threshold": None})
    with pytest.raises(ConfigError, match="RRF totals"):
        preset_config("chat-rrf", {"threshold": 0.8})
    assert preset_config("chat").merge == "max" and preset_config("chat-rrf").threshold is None
    assert preset_config("delta", parse_overrides(["delta.tau_low=0.5"])).delta.tau_low == 0.5


@pytest.fixture(scope="module")
def country_kb(tmp_path_factory: pytest.TempPathFactory):
    rows = [
        {"id": "se-sv", "text": "Apoteket säljer receptfria läkemedel i hela Sverige.", "lang": "sv", "country": "SE"},
        {"id": "se-en", "text": "Swedish pharmacies sell over-the-counter medicines.", "lang": "en", "country": "SE"},
        {"id": "se-sv2", "text": "Vårdcentralen har öppet vardagar mellan åtta och fem.", "lang": "sv", "country": "SE"},
        {"id": "pl-pl", "text": "Apteka sprzedaje leki bez recepty w całej Polsce.", "lang": "pl", "country": "PL"},
        {"id": "pl-en", "text": "Polish pharmacies sell medicines without prescription.", "lang": "en", "country": "PL"},
    ]
    folder = tmp_path_factory.mktemp("countries")
    (folder / "kb.jsonl").write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    index_sources("countries", [str(folder / "kb.jsonl")], str(folder / "store"))
    with KnowledgeBase.open("countries", str(folder / "store")) as kb:
        yield kb


QUESTION = Question("Where can I buy medicine without a prescription?", lang="en", country="SE")


@pytest.mark.slow
def test_kb_languages_paths_merge_by_max(country_kb: KnowledgeBase) -> None:
    llm = need_llm()
    result = Searcher(country_kb, preset_config("chat", {"llm": llm, "threshold": None})).search(QUESTION)
    plan = next(s for s in result.trace.steps if s.stage == "plan")
    labels = [r["label"] for r in plan.data["requests"]]
    assert labels[0] == "kb:en" and set(labels) <= {"kb:en", "kb:sv", "as_written"}  # KB side: never pl
    assert {h.passage.country for h in result.evidence.hits} == {"SE"}
    path_scores: dict[str, float] = {}
    for step in (s for s in result.trace.steps if s.stage == "rerank"):  # each path's own reranked scores
        for pid, score in step.data["ranking"]["hits"]:
            path_scores[pid] = max(path_scores.get(pid, -1.0), score)
    assert len({s.label for s in result.trace.steps if s.stage == "rerank"}) == len(labels)
    assert [(h.passage.id, round(h.score, 5)) for h in result.evidence.hits] == \
        sorted(path_scores.items(), key=lambda item: -item[1])[:len(result.evidence.hits)]  # the max over paths
    assert result.evidence.scorer == "learned:default"  # one calibrated scale across the paths
    again = Searcher(country_kb, preset_config("chat-rrf", {"llm": llm})).search(QUESTION)
    calls = again.trace.llm_totals()
    assert calls["llm_calls"] >= 1 and calls["llm_cached"] == calls["llm_calls"]  # the translation, from the cache


@pytest.mark.slow
def test_pivot_hyde_and_delta_plan_real_requests(country_kb: KnowledgeBase) -> None:
    llm = need_llm()
    swedish = Question("Var kan jag köpa receptfria läkemedel?", lang="sv", country="SE")
    trag = Searcher(country_kb, preset_config("trag", {"llm": llm, "country_filter": True})).search(swedish)
    assert {h.passage.lang for h in trag.evidence.hits} == {"en"}  # tRAG: the pivot corpus only
    hyde = Searcher(country_kb, preset_config("hyde-extra", {"llm": llm})).search(swedish)
    requests = next(s for s in hyde.trace.steps if s.stage == "plan").data["requests"]
    assert "hyde" in [r["label"] for r in requests]
    assert any(c.role == "hyde" for c in hyde.trace.llm_calls)
    delta = Searcher(country_kb, preset_config("delta", {"llm": llm})).search(swedish)
    step = next(s for s in delta.trace.steps if s.stage == "delta")
    assert step.data["fused"].startswith("[GLOB]") and "[LOCAL:sv] Var kan jag köpa" in step.data["fused"]
    assert len(step.data["fused"]) <= 900 and {c.role for c in delta.trace.llm_calls} >= {"classifier"}


def test_parallel_paths_equal_sequential_ones(country_kb: KnowledgeBase) -> None:
    """Two different paths run in threads; their merge equals running them one by one and merging."""
    from babelrag.retrieve.fusion import fuse
    from babelrag.types import PassageFilter, SearchRequest, Trace

    searcher = Searcher(country_kb, preset_config("multirag", {"k": 5}))
    requests = [SearchRequest("Where can I buy medicine without a prescription?", "countries", "en",
                              PassageFilter(), "en"),
                SearchRequest("Var har vårdcentralen öppet?", "countries", "sv", PassageFilter(), "sv")]
    sequential = [searcher._path(request, Trace()) for request in requests]
    assert [h.passage.id for h in sequential[0].hits][:2] != [h.passage.id for h in sequential[1].hits][:2]
    expected = [(h.passage.id, h.score) for h in fuse(sequential, "max", "merged").hits]
    for _ in range(5):  # threads interleave differently each time
        country_kb.forget_query_vectors()
        threaded = searcher._search_paths(requests, Trace())
        assert [(h.passage.id, h.score) for h in threaded.hits] == expected


def keyword_score(result, path: str, doc: str = "ascii") -> float:  # noqa: ANN001
    """The BM25 score the path's keyword arm gave ``doc`` (0 when it did not find it)."""
    step = next(s for s in result.trace.steps if s.stage == "retrieve" and s.label == path)
    hits = next(arm["hits"] for arm in step.data["arms"] if arm["scorer"] == "bm25")
    return next((score for pid, score in hits if pid.startswith(doc)), 0.0)


def test_unaccented_searches_the_question_without_its_accents_beside_it(tmp_path) -> None:  # noqa: ANN001
    assert without_accents("Vårdcentralen öppnar åtta på morgonen, café") == "Vardcentralen oppnar atta pa morgonen, cafe"
    assert without_accents("Straße, Øresund, ılık") == "Straße, Øresund, ılık"  # letters, not letters plus a mark
    rows = [{"id": "ascii", "text": "Vardcentralen har oppet vardagar mellan atta och fem.", "lang": "sv",
             "country": "SE"},
            {"id": "other", "text": "Apoteket saljer receptfria lakemedel i hela Sverige.", "lang": "sv", "country": "SE"}]
    (tmp_path / "kb.jsonl").write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    index_sources("ascii", [str(tmp_path / "kb.jsonl")], str(tmp_path / "store"))
    question = Question("När har vårdcentralen öppet?", lang="sv")
    with KnowledgeBase.open("ascii", str(tmp_path / "store")) as kb:
        keyword = {"mode": "keyword", "rerank": "dense-resort"}
        as_written = Searcher(kb, preset_config("default", keyword)).search(question)
        both = Searcher(kb, preset_config("default", {**keyword, "strategy": "unaccented"})).search(question)
        plain = Searcher(kb, preset_config("default", {**keyword, "strategy": "unaccented"})).search(
            Question("Vad kostar receptfria lakemedel?", lang="sv"))
    labels = [r["label"] for r in next(s for s in both.trace.steps if s.stage == "plan").data["requests"]]
    assert labels == ["as_written", "unaccented"]
    assert keyword_score(both, "unaccented") > 2 * keyword_score(both, "as_written")  # its words now match
    assert both.evidence.hits[0].passage.doc_id == "ascii"
    assert [r["label"] for r in next(s for s in plain.trace.steps if s.stage == "plan").data["requests"]] == ["as_written"]
