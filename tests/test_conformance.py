"""Every registered method keeps its word: its parameters validate against the configuration, it runs on a
small real KB with a fake LLM handed in (``Models``), it writes the trace stages it declares, and it calls the model no more
often than its facts say (the service's caps and the runs' cost accounting trust those facts).

Parametrised over the registries and the presets, so a new strategy, context, reranker or preset is
checked by registering it. The fake LLM fills whatever JSON schema it is handed with valid values (the
question's text for strings, the top of each range for numbers), so every structured call succeeds.
"""
from __future__ import annotations

import dataclasses

import json
from typing import Any

import pytest

from babelrag.config import NO_CONTEXT, PRESETS, make_config, preset_config
from babelrag.errors import ConfigError
from babelrag.generate.answerer import Answerer
from babelrag.ingest.pipeline import index_sources
from babelrag.ingest.pivot_copies import make_pivot_copies
from babelrag.kb import KnowledgeBase
from babelrag.models.llm import Completion
from babelrag.models.bundle import Models
from babelrag.models.translate import LLMTranslator
from babelrag.registry import CONTEXTS, RERANKERS, STRATEGIES, Entry
from babelrag.retrieve.pipeline import Searcher
from babelrag.search_config import SearchConfig
from babelrag.strategies.tuned import CellRule, Profile
from babelrag.tune.runner import write_profile
from babelrag.types import Question, Trace

from conftest import ProfessionalTranslations, small_squad

QUESTION = Question("Wie viele Punkte gab die Verteidigung der Panthers ab?", lang="de")
NEEDS_A_DIRECTORY = {"cross-encoder": "a cross-encoder directory"}


def _filled(schema: dict[str, Any], root: dict[str, Any], text: str) -> Any:
    """A value valid under ``schema``: the smallest shape, strings from ``text``, numbers at the top."""
    if "$ref" in schema:
        return _filled(root["$defs"][schema["$ref"].rsplit("/", 1)[-1]], root, text)
    if "anyOf" in schema:
        return _filled(next(s for s in schema["anyOf"] if s.get("type") != "null"), root, text)
    if "enum" in schema or "const" in schema:
        return schema["enum"][0] if "enum" in schema else schema["const"]
    kind = schema.get("type")
    if kind == "object":
        return {name: _filled(sub, root, text) for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        return [_filled(schema.get("items", {}), root, text)] * max(1, schema.get("minItems", 1))
    if kind in ("integer", "number"):
        top = schema.get("maximum", schema.get("exclusiveMaximum", 5) - 1)
        return int(top) if kind == "integer" else float(top)
    if kind == "boolean":
        return True
    return text[:schema.get("maxLength", len(text))]


class SchemaFilling:
    """A fake LLM: any schema filled validly, plain text echoing the request; it counts its calls."""

    def __init__(self, name: str):
        self.name, self.calls = name, 0

    def complete(self, messages: list[dict[str, str]], json_schema: dict[str, Any] | None = None,
                 max_tokens: int = 256, temperature: float = 0.0, seed: int = 0) -> Completion:
        self.calls += 1
        text = messages[-1]["content"][:200]
        reply = json.dumps(_filled(json_schema, json_schema, text), ensure_ascii=False) if json_schema else text
        return Completion(reply, 20, 10, 0.01, self.name)

    def stream(self, messages, on_text, max_tokens=256, temperature=0.0, seed=0) -> Completion:  # noqa: ANN001
        completion = self.complete(messages, max_tokens=max_tokens)
        on_text(completion.text)
        return completion


@pytest.fixture(scope="session")
def conformance_kb(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """One small real KB for every entry: one XQuAD article, two paragraphs, in German, English and Turkish."""
    folder = tmp_path_factory.mktemp("conformance")
    files = small_squad(folder / "data", articles=1, paragraphs=2, langs=("de", "en", "tr"))
    index_sources("conf", [str(f) for f in files], str(folder / "store"))
    with KnowledgeBase.open("conf", str(folder / "store")) as kb:
        make_pivot_copies(kb, ProfessionalTranslations(kb.collection.scroll()))  # for the pivot_copies path
        yield kb


@pytest.fixture(scope="session")
def profile_dir(conformance_kb: KnowledgeBase, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tuned profile for the KB (what `babelrag tune` writes): the question as written, everywhere."""
    folder = tmp_path_factory.mktemp("profile")
    write_profile(Profile(kb=conformance_kb.name, kb_created_at=conformance_kb.manifest.created_at,
                          embedder=conformance_kb.embedder.fingerprint(),
                          global_rule=CellRule(option="as_written")), folder / "conf.yaml")  # no cut: any scale
    return str(folder)


@pytest.fixture
def fake_llm(request: pytest.FixtureRequest) -> SchemaFilling:
    return SchemaFilling(f"conformance-{request.node.name}")


def handed(config: SearchConfig, llm: SchemaFilling) -> Models:
    """Every model a method may call is the fake, handed in as the pipeline hands in the real ones; the
    translator is not behind the persistent cache, so every call is counted."""
    return Models(config, llm=llm, translator=LLMTranslator(llm), generator=llm, refiner=llm, rewriter=llm)


def _stages(trace: Trace) -> set[str]:
    return {step.stage for step in trace.steps}


def _ids(entries: list[Entry]) -> list[str]:
    return [entry.name for entry in entries]


def test_every_kind_has_entries_and_a_name_registers_once() -> None:
    for registry in (STRATEGIES, CONTEXTS, RERANKERS):
        assert registry.names()
        taken = registry.entries()[0]
        with pytest.raises(ValueError, match="registered twice"):  # a second method never replaces the first
            registry.add(dataclasses.replace(taken, make=lambda *args: None))
        assert registry.entry(taken.name).make is taken.make


@pytest.mark.parametrize("entry", STRATEGIES.entries() + CONTEXTS.entries(), ids=_ids(STRATEGIES.entries() +
                                                                                    CONTEXTS.entries()))
def test_parameters_are_configuration_fields(entry: Entry) -> None:
    """A method's parameters are fields of the configuration (the flat names users set) with the same defaults."""
    assert set(entry.params.model_fields) <= set(SearchConfig.model_fields)
    assert entry.params_of(SearchConfig()) == entry.params()


@pytest.mark.parametrize("entry", STRATEGIES.entries(), ids=_ids(STRATEGIES.entries()))
def test_query_strategy_runs_writes_its_stages_and_keeps_its_costs(entry: Entry, conformance_kb: KnowledgeBase,
                                                                  fake_llm: SchemaFilling, profile_dir: str) -> None:
    config = make_config({"strategy": entry.name, "rerank": "learned", "merge": "max", "profile": profile_dir})
    result = Searcher(conformance_kb, config, models=handed(config, fake_llm)).search(QUESTION)
    assert result.evidence.hits, result.trace.failures
    assert set(entry.facts.trace_stages) <= _stages(result.trace)
    assert fake_llm.calls <= entry.facts.llm_calls_per_question
    assert (fake_llm.calls > 0) == entry.facts.calls_llm


@pytest.mark.parametrize("entry", CONTEXTS.entries(), ids=_ids(CONTEXTS.entries()))
def test_context_strategy_runs_writes_its_stages_and_keeps_its_costs(entry: Entry, conformance_kb: KnowledgeBase,
                                                                    fake_llm: SchemaFilling) -> None:
    passages = 2
    config = make_config({"context": entry.name, "generate_k": passages})
    question = Question("How many points did the Panthers defense surrender?", lang="tr")  # every passage foreign
    answer = Answerer(conformance_kb, config, models=handed(config, fake_llm)).ask(question)
    assert answer.context.passages and answer.context.strategy == entry.name
    assert set(entry.facts.trace_stages) <= _stages(answer.trace)
    generator_calls = 1
    assert fake_llm.calls - generator_calls <= entry.facts.llm_calls_per_passage * passages
    assert (fake_llm.calls > generator_calls) == entry.facts.calls_llm


@pytest.mark.parametrize("entry", RERANKERS.entries(), ids=_ids(RERANKERS.entries()))
def test_reranker_runs_and_writes_its_stage(entry: Entry, conformance_kb: KnowledgeBase) -> None:
    if entry.argument:
        with pytest.raises(ConfigError, match="rerank"):
            Searcher(conformance_kb, make_config({"rerank": f"{entry.name}:/nonexistent"}))
        pytest.skip(f"runs with {NEEDS_A_DIRECTORY[entry.name]} (tests/test_cross_encoder.py)")
    result = Searcher(conformance_kb, make_config({"rerank": entry.name})).search(QUESTION)
    assert result.evidence.hits
    assert ("rerank" in _stages(result.trace)) == (entry.name != "none")


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_validates_and_searches(name: str, conformance_kb: KnowledgeBase,
                                            fake_llm: SchemaFilling, profile_dir: str) -> None:
    config = preset_config(name, {"profile": profile_dir})
    assert config.strategy in STRATEGIES and (config.context == NO_CONTEXT or config.context in CONTEXTS)
    result = Searcher(conformance_kb, config, models=handed(config, fake_llm)).search(QUESTION)
    # the fake fills strings with the question itself, so a translation comes back in the wrong language: a
    # model failure, traced, and the question as written still searches
    assert result.evidence.hits and all(f.stage == "translate" for f in result.trace.failures)
    declared = sum(STRATEGIES.facts(s).llm_calls_per_question for s in (config.strategy, *config.extra_paths))
    assert fake_llm.calls <= declared
