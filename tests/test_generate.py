"""Answer generation and the context strategies: prompts in the question's language, citations, CrossRAG's
pivot, DKM-RAG's sets, QTT's tags, scoring only generated text, and answers end to end with the real model."""
from __future__ import annotations

from pathlib import Path

import pytest

from babelrag.config import preset_config
from babelrag.context import build_context
from babelrag.models.bundle import Models
from babelrag.evaluate.golden import GoldenQuestion
from babelrag.evaluate.runs import run_config
from babelrag.generate.answerer import Answerer
from babelrag.generate.generator import citations_of, messages_for, strip_citations
from babelrag.generate.prompts import wording
from babelrag.kb import KnowledgeBase
from babelrag.types import Context, ContextPassage, Hit, Passage, Question, Trace

from conftest import need_llm

GERMAN = Question("Wer hat den Super Bowl 50 gewonnen?", lang="de")


def passage(pid: str, text: str, lang: str) -> Passage:
    return Passage(pid, text, pid.split("@")[0], lang)


CONTEXT = Context("multirag", (ContextPassage(1, passage("a@en", "Denver won Super Bowl 50.", "en"),
                                              "Denver won Super Bowl 50.", "en"),
                               ContextPassage(2, passage("b@de", "Das Spiel fand in Santa Clara statt.", "de"),
                                              "Das Spiel fand in Santa Clara statt.", "de")))


def test_prompts_are_written_in_the_question_language() -> None:
    system, user = messages_for(GERMAN, CONTEXT)
    assert system["content"].startswith("Entnimm den Dokumenten") and "auf Deutsch" in system["content"]
    assert user["content"].startswith("Hintergrund:\n[1] Denver won") and "Frage: Wer hat" in user["content"]
    bare = messages_for(GERMAN, Context("none"))
    assert bare[0]["content"] == "Beantworte die Frage so kurz wie möglich auf Deutsch." and bare[1]["content"] == GERMAN.text
    assert "in Swahili" in wording("sw").with_docs  # no own text: English, naming the language


def test_citations_named_or_attributed() -> None:
    cited, how = citations_of("Die Denver Broncos [1][2].", CONTEXT)
    assert how == "cited" and [c.number for c in cited] == [1, 2]
    attributed, how = citations_of("in Santa Clara", CONTEXT)
    assert how == "attributed" and [c.number for c in attributed] == [2]
    assert citations_of("Keine Ahnung.", CONTEXT) == ((), "none")
    assert strip_citations("Denver [1] won [12].") == "Denver won ."


def test_multirag_keeps_passages_as_retrieved() -> None:
    hits = [Hit(passage("x@sv", "Hej", "sv"), 0.9, "p"), Hit(passage("y@en", "Hi", "en"), 0.8, "p")]
    config = preset_config("default")
    context = build_context("multirag", Models(config)).build(GERMAN, hits, config, Trace())
    assert [(c.number, c.lang, c.translated) for c in context.passages] == [(1, "sv", False), (2, "en", False)]


@pytest.fixture
def kb(xquad_store: str):
    with KnowledgeBase.open("xq", xquad_store) as handle:
        yield handle


def small(preset: str, **overrides) -> object:
    return preset_config(preset, {"llm": need_llm(), "generate_k": 2, "answer_tokens": 32, "rerank": "dense",
                                  **overrides})


@pytest.mark.slow
def test_ask_answers_in_german_and_cites_a_passage(kb: KnowledgeBase) -> None:
    answer = Answerer(kb, small("multirag", generate_k=3)).ask("Wer hat den Super Bowl 50 gewonnen?")
    assert answer.question.lang == "de"
    from babelrag.evaluate.answers import answer_language_correct
    assert answer_language_correct(strip_citations(answer.text), "de", ["de", "en"]) is not False
    assert answer.citations and answer.cited_how in ("cited", "attributed")
    assert all(c.passage.doc_id.startswith("Super_Bowl_50") for c in answer.citations)
    prompt = "\n".join(m["content"] for m in messages_for(answer.question, answer.context))
    assert prompt not in answer.text and wording("de").with_docs not in answer.text  # only generated text
    assert [c.role for c in answer.trace.llm_calls] == ["generator"]


@pytest.mark.slow
def test_crossrag_context_is_in_the_pivot(kb: KnowledgeBase) -> None:
    thai = Question("ใครชนะซูเปอร์โบว์ล 50", lang="th")
    answer = Answerer(kb, small("multirag+crossrag", langs=["th", "zh"])).ask(thai)
    assert answer.context.passages and all(c.lang == "en" and c.translated for c in answer.context.passages)
    assert all(c.passage.lang in ("th", "zh") for c in answer.context.passages)  # source from metadata
    assert {c.role for c in answer.trace.llm_calls} == {"translator", "generator"}


@pytest.mark.slow
def test_dkm_sets_and_qtt_tags(kb: KnowledgeBase) -> None:
    dkm = Answerer(kb, small("multirag+dkm", langs=["en"])).ask(GERMAN)
    kinds = [c.kind for c in dkm.context.passages]
    assert kinds == ["translated", "translated", "refined", "refined"]
    assert all(c.lang == "de" for c in dkm.context.passages)
    qtt = Answerer(kb, small("multirag+qtt", langs=["en"])).ask(GERMAN)
    assert all("[Qualität]" in c.text for c in qtt.context.passages) and "Originale" in qtt.context.instruction
    strict = Answerer(kb, small("multirag+qtt", langs=["en"], qtt_min_score=4.0)).ask(GERMAN)
    kept = [c.passage.id for c in qtt.context.passages if (c.tags.get("mean") or 0.0) >= 4.0]
    assert [c.passage.id for c in strict.context.passages] == kept  # exactly the translations scoring ≥ 4


@pytest.mark.slow
def test_answer_runs_score_answers_per_cell(xquad_store: str, tmp_path: Path) -> None:
    golden = [GoldenQuestion(id="q1", question=GERMAN.text, lang="de", kb="xq", gold_pages=("Super_Bowl_50#0",),
                             answers={"de": ["Denver Broncos"], "en": ["Denver Broncos"]})]
    norag = run_config("no-RAG", small("norag"), golden, tmp_path / "norag", xquad_store, answer=True)
    row = norag.rows[0]
    assert row["docs_passed"] == 0 and "recall@10" not in row and 0.0 <= row["answer_char3"] <= 1.0
    rag = run_config("MultiRAG", small("multirag"), golden, tmp_path / "rag", xquad_store, answer=True)
    cell = rag.metrics["cells"][0]
    assert {"answer_char3", "answer_em", "recall@10", "llm_calls"} <= set(cell) and cell["llm_calls"] == 1
