"""Faithful to the papers where the first release was not (docs/methods.md#delta-generator-query, #dkm-rag, #qtt-rag): what DELTA's generator
is asked, QTT-RAG's words in every language the library answers in, a failed translation never shown as
native, and DKM-RAG's rewriter being the generator's model. Scripted LLMs record what each role was sent;
retrieval runs on the real engine over real XQuAD paragraphs."""
from __future__ import annotations

import pytest

from babelrag.experiments.ladders import ladder
from babelrag.config import preset_config
from babelrag.context import build_context
from babelrag.models.bundle import Models
from babelrag.context.qtt_wording import WORDINGS, qtt_wording
from babelrag.generate.answerer import Answerer
from babelrag.generate.prompts import WORDINGS as GENERATOR_LANGUAGES
from babelrag.kb import KnowledgeBase
from babelrag.types import Hit, Passage, Question, Trace

GERMAN = "Wie viele Punkte gab die Verteidigung der Panthers ab?"
PAPERS = ("ar", "de", "en", "es", "fr", "ja", "ko", "ru", "sv", "th", "tr", "zh")  # the minimum
SHIPPED_DATA = ("ar", "de", "en", "es", "ru", "sv", "th", "tr", "zh")


@pytest.fixture
def kb(xquad_store: str):  # noqa: ANN201
    with KnowledgeBase.open("xq", xquad_store) as handle:
        yield handle


def _role(messages: list[dict[str, str]]) -> str:
    system = messages[0]["content"]
    if system.startswith("You are a translation engine"):
        return "translate"
    if "Rewrite the passage" in system:
        return "refine"
    if "[1]" in messages[-1]["content"] or "Hintergrund" in messages[-1]["content"]:
        return "generate"
    return "other"


def test_delta_asks_the_generator_its_fused_query_unless_told_otherwise(kb: KnowledgeBase, scripted) -> None:
    sent: dict[str, list[str]] = {"generate": []}

    def reply(messages: list[dict[str, str]]) -> str:
        role = _role(messages)
        if role == "translate":
            return '{"translation": "How many points did the Panthers defense give up?"}'
        if role == "generate":
            sent["generate"].append(messages[-1]["content"])
            return "308 [1]"
        return "not JSON"  # the locale classifier fails: DELTA goes on without a cue (a logged fallback)
    llm = scripted(reply)
    question = Question(GERMAN, lang="de")
    fused = Answerer(kb, preset_config("delta", {"llm": llm})).ask(question)
    asked = sent["generate"][-1].rsplit("Frage:", 1)[1]
    assert asked.strip().startswith("[GLOB] How many points") and f"[LOCAL:de] {GERMAN}" in asked
    assert next(s for s in fused.trace.steps if s.stage == "generate").data["asked"] == "fused query"
    assert fused.question.text == GERMAN  # the answer still belongs to the question as asked
    original = Answerer(kb, preset_config("delta", {"llm": llm, "delta": {"generator_query": "original"}}))
    original.ask(question)
    assert sent["generate"][-1].rsplit("Frage:", 1)[1].strip() == GERMAN
    plain = Answerer(kb, preset_config("multirag", {"llm": llm}))  # no DELTA path: nothing to fuse
    plain.ask(question)
    assert sent["generate"][-1].rsplit("Frage:", 1)[1].strip() == GERMAN


@pytest.mark.parametrize("lang", sorted(set(PAPERS) | set(SHIPPED_DATA) | set(GENERATOR_LANGUAGES)))
def test_qtt_speaks_every_language_the_generator_does(lang: str) -> None:
    words, english = qtt_wording(lang), WORDINGS["en"]
    assert lang in WORDINGS  # its own words, not the English ones with a name put in
    if lang != "en":
        assert words.rules != english.rules and words.quality != english.quality
        assert len({words.semantic, words.grammar, words.fluency, words.unscored, words.untranslated}) == 5
        assert not {words.unscored, words.untranslated} & {english.unscored, english.untranslated}


def test_a_failed_translation_is_tagged_never_shown_as_native(scripted) -> None:
    looping = scripted(lambda m: '{"translation": "' + "Punkte Punkte " * 80 + '"}' if _role(m) == "translate"
                       else '{"semantic_equivalence": 4.5, "grammatical_accuracy": 4.0, "naturalness": 3.8}')
    native = Passage("p0@de", "Die Verteidigung der Panthers gab nur 308 Punkte ab.", "p0", "de")
    foreign = Passage("p1@en", "The Panthers defense gave up just 308 points, ranking sixth.", "p1", "en")
    trace = Trace()
    config = preset_config("multirag", {"llm": looping})
    context = build_context("qtt", Models(config)).build(Question("Wie viele Punkte?", lang="de"),
                                                         [Hit(native, 0.9, "p"), Hit(foreign, 0.8, "p")], config, trace)
    kept, failed = context.passages
    assert kept.text == native.text and kept.kind == "retrieved"
    assert failed.kind == "untranslated" and not failed.translated and failed.lang == "en"
    assert failed.text == f"{foreign.text}\n[Qualität] Übersetzung fehlgeschlagen, Original auf en"
    assert [f.stage for f in trace.failures] == ["translate"]
    assert "Einige Dokumente wurden auf Deutsch verfasst" in context.instruction
    strict_config = preset_config("multirag", {"llm": looping, "qtt_min_score": 3.0})
    strict = build_context("qtt", Models(strict_config)).build(Question("Wie viele Punkte?", lang="de"),
                                                               [Hit(foreign, 0.8, "p")], strict_config, Trace())
    assert strict.passages == ()  # the hard filter drops what it cannot score


def test_dkm_refines_with_the_generators_model(scripted) -> None:
    calls: dict[str, list[str]] = {"small": [], "generator": [], "refiner": []}

    def model(name: str):  # noqa: ANN202
        def reply(messages: list[dict[str, str]]) -> str:
            calls[name].append(_role(messages))
            return '{"translation": "Die Verteidigung gab 308 Punkte ab."}' if _role(messages) == "translate" \
                else "Die Verteidigung der Panthers ließ 308 Punkte zu."
        return scripted(reply)
    small, generator, refiner = model("small"), model("generator"), model("refiner")
    hits = [Hit(Passage("p1@en", "The Panthers defense gave up just 308 points.", "p1", "en"), 0.9, "p")]
    question = Question("Wie viele Punkte?", lang="de")
    config = preset_config("multirag", {"llm": small, "generator": generator})
    build_context("dkm", Models(config)).build(question, hits, config, Trace())
    assert calls["small"] == ["translate"] and calls["generator"] == ["refine"]  # docs/methods.md#dkm-rag default
    config = preset_config("multirag", {"llm": small, "generator": generator, "refiner": refiner})
    build_context("dkm", Models(config)).build(question, hits, config, Trace())
    assert calls["refiner"] == ["refine"] and calls["generator"] == ["refine"]  # set apart, it is used instead


def test_the_qa_ladder_reproduces_deltas_table() -> None:
    """[DELTA] Table 5 (docs/methods.md#delta-table-5): its rows in its order, each step the method the row names, with the
    paper's settings — retrieval over the same multilingual datastore, 5 passages to the generator."""
    expected = [  # row → (strategy, lang_scope, context)
        ("MultiRAG", ("as_written", "all", "multirag")),
        ("CrossRAG", ("as_written", "all", "crossrag")),
        ("DKM-RAG", ("as_written", "all", "dkm")),
        ("QTT-RAG", ("as_written", "all", "qtt")),
        ("English Translation", ("pivot", "all", "multirag")),
        ("DELTA", ("delta", "all", "multirag")),
        ("DELTA (original query at generation)", ("delta", "all", "multirag")),
    ]
    steps = ladder("qa-delta")
    assert [step.name for step in steps] == [name for name, _ in expected]
    for step, (_, (strategy, scope, context)) in zip(steps, expected):
        config = preset_config(step.preset, step.overrides)
        assert step.answer and (config.strategy, config.lang_scope, config.context) == (strategy, scope, context)
        assert config.generate_k == 5 and config.pivot == "en" and config.extra_paths == ()
        assert step.baseline in (None, "MultiRAG", "DELTA")
    delta = preset_config("delta").delta  # Eq. 5's thresholds, the 900-character cap, K = 3 aliases
    assert (delta.tau_low, delta.tau_high, delta.tau_boost, delta.max_chars, delta.aliases) == (0.6, 0.85, 0.7, 900, 3)
    assert delta.generator_query == "fused"
    assert preset_config(steps[-1].preset, steps[-1].overrides).delta.generator_query == "original"

