"""Failures are data: a bad model answer takes the method's fallback, is recorded in the trace, counted per
cell, never cached as a success, and never aborts a run. Scripted LLMs stand in for the measured failure
modes of the small local model (decoding loops, a copied prompt example, empty output, an unreachable
endpoint); retrieval runs on the real engine over real XQuAD paragraphs."""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Scripted

from babelrag.config import preset_config
from babelrag.context import build_context
from babelrag.models.bundle import Models
from babelrag.errors import BabelragError
from babelrag.evaluate.golden import GoldenQuestion
from babelrag.evaluate.runs import run_config
from babelrag.kb import KnowledgeBase
from babelrag.models.llm import LLMError
from babelrag.models.registry import translator_for
from babelrag.models.translate import CachedTranslator, LLMTranslator, translate_many, translation_problem
from babelrag.retrieve.pipeline import Searcher
from babelrag.types import Hit, Passage, Question, Trace

GREEK = "Πόσους πόντους έδωσε η άμυνα των Panthers;"
GREEK_LOOP = "Πόσοι άνθρωποι ζουν στο Όσλο ήτα ένθρωποι ζουν στο Όσλο ήτα ένθρωποι ζουν στο Όσλο ήτα ένθρωποι ζουν στο"
HINDI_LOOP = "पैंथर्स की रक्षा ने कितने अंक गर्ना गर्ना गर्ना गर्ना गर्ना गर्ना"


@pytest.mark.parametrize("bad, why", [
    ("", "empty"), ("Wie viele Panthers sind in Oslo?", "copied the prompt's example"),
    (GREEK_LOOP, "repeats itself"), (HINDI_LOOP, "repeats itself"), ("x" * 400, "runaway"),
    (GREEK, "unchanged")])
def test_translation_checks_catch_the_measured_failures(bad: str, why: str) -> None:
    assert why in (translation_problem(GREEK, bad, "el", "de") or "")


@pytest.mark.parametrize("source, good, src, tgt", [
    (GREEK, "Wie viele Punkte hat die Verteidigung der Panthers abgegeben?", "el", "de"),
    ("Wer hat den Super Bowl 50 gewonnen?", "Who won Super Bowl 50?", "de", "en"),
    ("谁赢得了第50届超级碗？", "Who won Super Bowl 50?", "zh", "en"),
    ("Who won Super Bowl 50?", "谁赢得了第50届超级碗？", "en", "zh"),
    ("Wie viele Menschen leben in Oslo?", "How many people live in Oslo?", "de", "en"),
    ("Super Bowl 50", "Super Bowl 50", "de", "en"),
    ("How many ambassadors were there?", "Сколько послов там было?", "en", "ru"),  # "послов" holds "осло"
    ("Literally a business meeting", "Doslova poslovni sastanak", "en", "hr"),
    ("The prize was 1000000000 dollars.", "Der Preis betrug 1000000000 Dollar.", "en", "de")])
def test_translation_checks_pass_real_translations(source: str, good: str, src: str, tgt: str) -> None:
    assert translation_problem(source, good, src, tgt) is None


def test_failed_translations_are_never_cached(tmp_path: Path) -> None:
    replies = iter([f'{{"de": "{GREEK_LOOP}", "en": "How many points did the Panthers defense give up?"}}',
                    f'{{"translation": "{GREEK_LOOP}"}}',  # the retry of the target that came back in Greek
                    '{"translation": "Wie viele Punkte gab die Verteidigung der Panthers ab?"}'])
    llm = Scripted("loops-once", lambda messages: next(replies))
    cached = CachedTranslator(LLMTranslator(llm), tmp_path / "t.sqlite")
    first = translate_many(cached, GREEK, "el", ["en", "de"], Trace())
    assert "de" in first.failed and first.texts["en"].startswith("How many points")
    second = translate_many(cached, GREEK, "el", ["en", "de"], Trace())
    assert second.texts["de"].startswith("Wie viele Punkte") and llm.calls == 3  # de asked again, en from the cache


def test_invalid_json_twice_is_a_failed_translation_not_an_error() -> None:
    llm = Scripted("never-json", lambda messages: '{"translation": "' + GREEK_LOOP)
    trace = Trace()
    done = translate_many(LLMTranslator(llm), GREEK, "el", ["en"], trace)
    assert done.texts == {} and "invalid JSON twice" in done.failed["en"]
    assert [c.role for c in trace.llm_calls] == ["translator", "translator:repair"]  # the cost is still counted


@pytest.fixture
def kb(xquad_store: str):
    with KnowledgeBase.open("xq", xquad_store) as handle:
        yield handle


def _translating(bad_targets: set[str]) -> Callable[[list[dict[str, str]]], str]:
    """Translates the Super Bowl question into every asked key, looping for ``bad_targets``."""
    good = {"en": "How many points did the Panthers defense give up?", "de": "Wie viele Punkte gab die "
            "Verteidigung der Panthers ab?", "zh": "黑豹队的防守丢了多少分？", "ar": "كم عدد النقاط التي تنازل عنها دفاع الفهود؟",
            "ru": "Сколько очков пропустила защита «Пантерз»?", "es": "¿Cuántos puntos permitió la defensa de los Panthers?"}

    def reply(messages: list[dict[str, str]]) -> str:
        asked = re.findall(r"\((\w\w)\)", messages[0]["content"])
        keys = asked if len(asked) > 1 else ["translation"]
        langs = asked if len(asked) > 1 else asked[:1]
        return json.dumps({k: (GREEK_LOOP if lang in bad_targets else good.get(lang, good["en"]))
                           for k, lang in zip(keys, langs)}, ensure_ascii=False)
    return reply


def test_a_lost_kb_language_translation_is_dropped_and_the_question_stands_in(kb: KnowledgeBase, scripted) -> None:
    llm = scripted(_translating({"de"}))
    config = preset_config("chat", {"llm": llm, "threshold": None, "langs": ["en", "de", "zh"]})
    manifest = kb.manifest
    manifest.language_overrides.all = ["en", "de"]
    kb.write_manifest(manifest)
    try:
        result = Searcher(kb, config).search(Question(GREEK, lang="el"))
    finally:
        manifest.language_overrides.all = None
        kb.write_manifest(manifest)
    labels = [r["label"] for s in result.trace.steps if s.stage == "plan" for r in s.data["requests"]]
    assert labels == ["kb:en", "as_written"]  # kb:de dropped, never searched
    assert [f.stage for f in result.trace.failures] == ["translate"] and "el→de" in result.trace.failures[0].reason
    assert result.evidence.hits and result.to_dict()["warnings"][0].startswith("translate failed")
    assert result.evidence.doc_ids()[0].startswith("Super_Bowl_50")


def test_pivot_failure_searches_the_question_as_written(kb: KnowledgeBase, scripted) -> None:
    llm = scripted(_translating({"en"}))
    result = Searcher(kb, preset_config("english-translation", {"llm": llm})).search(Question(GREEK, lang="el"))
    plan = next(s for s in result.trace.steps if s.stage == "plan")
    assert [r["label"] for r in plan.data["requests"]] == ["as_written"]
    assert [f.stage for f in result.trace.failures] == ["translate"] and result.evidence.hits


def test_empty_hyde_is_dropped_alone_or_beside_other_paths(kb: KnowledgeBase, scripted) -> None:
    llm = scripted(lambda messages: "   ")
    question = Question("Wer hat den Super Bowl 50 gewonnen?", lang="de")
    alone = Searcher(kb, preset_config("hyde", {"llm": llm, "threshold": None, "country_filter": False})).search(question)
    assert [r["label"] for r in next(s for s in alone.trace.steps if s.stage == "plan").data["requests"]] == \
        ["as_written"]
    assert [f.reason for f in alone.trace.failures] == ["empty passage"]
    extra = Searcher(kb, preset_config("multirag", {"llm": llm, "extra_paths": ["hyde"]})).search(question)
    assert [r["label"] for r in next(s for s in extra.trace.steps if s.stage == "plan").data["requests"]] == \
        ["as_written"] and len(extra.trace.failures) == 1


def test_delta_degrades_step_by_step(kb: KnowledgeBase, scripted) -> None:
    def reply(messages: list[dict[str, str]]) -> str:
        system = messages[0]["content"]
        if system.startswith("You are a translation engine"):
            return '{"translation": "How many points did the Panthers defense give up?"}'
        return "not JSON at all"  # classifier (and its repair) fail
    question = Question(GREEK, lang="el")
    result = Searcher(kb, preset_config("delta", {"llm": scripted(reply)})).search(question)
    step = next(s for s in result.trace.steps if s.stage == "delta")
    assert step.data["cue"] is None and step.data["fused"].startswith("[GLOB] How many points")
    assert "[LOCAL:el]" in step.data["fused"] and "[LOCALE_HINT]" not in step.data["fused"]
    assert [f.stage for f in result.trace.failures] == ["classifier"]
    lost = Searcher(kb, preset_config("delta", {"llm": scripted(lambda m: "")})).search(question)
    assert [r["label"] for r in next(s for s in lost.trace.steps if s.stage == "plan").data["requests"]] == \
        ["as_written"] and lost.trace.failures[0].stage == "translate"


def _hits(*langs: str) -> list[Hit]:
    text = {"de": "Die Verteidigung der Panthers gab nur 308 Punkte ab und stand damit auf Platz sechs der Liga.",
            "en": "The Panthers defense gave up just 308 points, ranking sixth in the league.",
            "zh": "黑豹队的防守只丢了308分，在联盟中排名第六。"}
    return [Hit(Passage(f"p{i}@{lang}", text[lang], f"p{i}", lang), 0.9 - i / 10, "p") for i, lang in enumerate(langs)]


def test_context_strategies_keep_failed_passages_honest(scripted) -> None:
    looping = scripted(lambda messages: GREEK_LOOP if "translation engine" in messages[0]["content"] else "")
    config = preset_config("multirag", {"llm": looping})
    trace = Trace()
    cross = build_context("crossrag", Models(config)).build(Question("Wie viele Punkte?", lang="de"), _hits("de", "zh"),
                                                          config, trace)
    assert [(c.lang, c.translated) for c in cross.passages] == [("de", False), ("zh", False)]  # not "translated"
    assert [f.stage for f in trace.failures] == ["translate", "translate"]
    refining = scripted(lambda messages: '{"translation": "Die Verteidigung gab 308 Punkte ab."}' if
                        "translation engine" in messages[0]["content"] else "")
    dkm_trace = Trace()
    dkm_config = preset_config("multirag", {"llm": refining})
    dkm = build_context("dkm", Models(dkm_config)).build(Question("Wie viele Punkte?", lang="de"), _hits("de", "en"),
                                                         dkm_config, dkm_trace)
    assert [c.kind for c in dkm.passages] == ["retrieved", "translated"]  # empty rewrites are not passages
    assert [f.stage for f in dkm_trace.failures] == ["refine", "refine"]


def test_qtt_judge_failure_is_unscored_and_counted(scripted) -> None:
    def reply(messages: list[dict[str, str]]) -> str:
        if "translation engine" in messages[0]["content"]:
            return '{"translation": "Die Verteidigung der Panthers gab nur 308 Punkte ab."}'
        raise LLMError("LLM endpoint http://judge unreachable after 4 tries")
    trace = Trace()
    config = preset_config("multirag", {"llm": scripted(reply)})
    qtt = build_context("qtt", Models(config)).build(Question("Wie viele Punkte?", lang="de"), _hits("en"), config,
                                                     trace)
    assert qtt.passages[0].text.endswith("[Qualität] nicht bewertet")  # tagged, in the question's language
    assert [f.stage for f in trace.failures] == ["judge"]


def test_a_run_never_aborts_and_counts_failures_per_cell(xquad_store: str, tmp_path: Path, scripted) -> None:
    llm = scripted(_translating({"en"}))  # every translation into English loops
    golden = [GoldenQuestion(id=f"q{i}", question=text, lang=lang, kb="xq", gold_pages=("Super_Bowl_50#0",),
                             tags={"split": "test"})
              for i, (text, lang) in enumerate([(GREEK, "el"), ("Wie viele Punkte gab die Verteidigung der Panthers "
                                                                "ab?", "de"),
                                                 ("How many points did the Panthers defense surrender?", "en")])]
    result = run_config("chat", preset_config("chat", {"llm": llm, "threshold": None}), golden, tmp_path / "run",
                        xquad_store)
    rows = {r["id"]: r for r in result.rows}
    assert rows["q0"]["failed"] == 1.0 and rows["q0"]["failure_stages"] == ["translate"]
    assert rows["q0"]["mrr"] == 1.0  # kb:ar, kb:de and the question as written found the page
    overall = result.metrics["overall"]
    assert overall["failed"] == pytest.approx(2 / 3) and overall["failure_stages"] == {"translate": 2}
    cells = {c["lang"]: c for c in result.metrics["cells"]}
    assert cells["el"]["failed"] == 1.0 and cells["en"]["failed"] == 0.0  # en → en needs no translation


def test_a_model_failure_is_recorded_and_a_broken_setup_aborts(xquad_store: str, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    golden = [GoldenQuestion(id=f"q{i}", question="Who won Super Bowl 50?", lang="en", kb="xq",
                             gold_pages=("Super_Bowl_50#0",)) for i in range(12)]
    original = Searcher.search
    calls = {"n": 0}

    def flaky(self, question):  # noqa: ANN001, ANN202 - the third question's model call fails
        calls["n"] += 1
        if calls["n"] == 4:  # 1 = the warm-up search
            raise LLMError("endpoint unreachable after 4 tries")
        return original(self, question)
    monkeypatch.setattr(Searcher, "search", flaky)
    result = run_config("vector", preset_config("vector"), golden, tmp_path / "one", xquad_store)
    broken = [r for r in result.rows if r["failed"]]
    assert len(result.rows) == 12 and len(broken) == 1 and broken[0]["recall@10"] == 0.0
    assert "LLMError: endpoint unreachable" in broken[0]["trace"]["failures"][0]["reason"]

    def always(self, question):  # noqa: ANN001, ANN202
        raise LLMError("nothing answers")
    monkeypatch.setattr(Searcher, "search", always)
    with pytest.raises(BabelragError, match="first 10 questions all failed"):
        run_config("vector", preset_config("vector", {"k": 9}), golden, tmp_path / "all", xquad_store)


@pytest.mark.parametrize("concurrency", [1, 3])
def test_a_bug_in_a_strategy_stops_the_run_and_a_resumed_run_starts_there(
        xquad_store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, concurrency: int) -> None:
    from babelrag.strategies.as_written import AsWritten

    golden = [GoldenQuestion(id=f"q{i}", question=f"Who won Super Bowl 50? ({i})", lang="en", kb="xq",
                             gold_pages=("Super_Bowl_50#0",)) for i in range(6)]
    original = AsWritten.plan

    def buggy(self, question, kb, config, trace):  # noqa: ANN001, ANN202 - our own code breaks on one question
        if question.text.endswith("(3)"):
            return original(self, question, kb, config, trace) + None  # a TypeError, as a real bug would be
        return original(self, question, kb, config, trace)
    monkeypatch.setattr(AsWritten, "plan", buggy)
    folder = tmp_path / "run"
    with pytest.raises(TypeError):
        run_config("vector", preset_config("vector"), golden, folder, xquad_store, concurrency=concurrency)
    written = [json.loads(line)["id"] for line in (folder / "traces.jsonl").read_text().splitlines()]
    assert written == ["q0", "q1", "q2"]  # in order, up to the question it stopped at; no row scored it a miss
    monkeypatch.setattr(AsWritten, "plan", original)  # fixed: the resumed run starts at q3
    result = run_config("vector", preset_config("vector"), golden, folder, xquad_store)
    assert [r["id"] for r in result.rows] == [f"q{i}" for i in range(6)] and not any(r["failed"] for r in result.rows)


def test_golden_answers_never_fall_back_to_another_language() -> None:
    question = GoldenQuestion(id="q", question="Vem vann?", lang="sv", kb="kb", gold_pages=("p",),
                              answers={"en": ["Denver Broncos"]})
    assert question.answers_in("sv") == [] and question.answers_in("en") == ["Denver Broncos"]


def test_translator_registry_names_a_registered_llm(scripted) -> None:
    name = scripted(lambda messages: '{"translation": "Who won?"}')
    assert translator_for("llm", name).name == f"llm:{name}"
