"""CORAL: the planner's schema, the critic's filter and ordering, the loop's stops and budget (driven by a
scripted planner/critic over real passages), and the whole loop with the real small model on real XQuAD."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from babelrag.config import preset_config
from babelrag.errors import ConfigError
from babelrag.evaluate.loops import loop_summary
from babelrag.evaluate.report import markdown
from babelrag.generate.answerer import Answerer
from babelrag.ingest.pipeline import index_sources
from babelrag.kb import KnowledgeBase
from babelrag.models.bundle import Models
from babelrag.models.llm import Completion
from babelrag.retrieve.pipeline import Searcher
from babelrag.strategies import coral
from babelrag.strategies.coral import CriticScores, Judged, evidence_order, passes, plan_model
from babelrag.types import Hit, Passage, Question

from conftest import a_manifest, need_llm, small_squad


def scores(*criteria: int) -> CriticScores:
    return CriticScores(critique="fine", relevance=criteria[0], usefulness=criteria[1],
                        clarity_specificity=criteria[2], compatibility=criteria[3])


def test_planner_schema_rejects_unknown_corpora_by_name() -> None:
    model = plan_model(["en", "de"], ["DE", "TR"], 2, rewrite=True)
    plan = model.model_validate_json('{"corpora": ["de", "en"], "countries": ["DE"], "rewrite_type": "narrow", '
                                     '"query": "Shelley poem 1819"}')
    assert plan.corpora == ["de", "en"] and plan.rewrite_type == "narrow"
    with pytest.raises(ValidationError, match="'en' or 'de'") as error:
        model.model_validate_json('{"corpora": ["sv"], "countries": [], "rewrite_type": "none", "query": ""}')
    assert "sv" in str(error.value)
    with pytest.raises(ValidationError):  # at most `most` corpora, at least one
        model.model_validate_json('{"corpora": [], "countries": []}')
    schema = plan_model(["en", "de"], [], 2, rewrite=False).model_json_schema()
    assert set(schema["properties"]) == {"corpora"}  # no rewrite before the critic has spoken


def test_critic_filter_and_evidence_order() -> None:
    assert passes(scores(3, 3, 3, 3), 3, None) and not passes(scores(5, 5, 5, 2), 3, None)
    assert not passes(scores(3, 3, 3, 3), 3, 13) and passes(scores(4, 3, 3, 3), 3, 13)
    hit = lambda pid: Hit(Passage(pid, "text", pid, "en"), 0.5, "p")  # noqa: E731
    validated = {"a": Judged(hit("a"), scores(4, 4, 4, 4), 2), "b": Judged(hit("b"), scores(5, 5, 5, 5), 2),
                 "c": Judged(hit("c"), scores(4, 4, 4, 4), 1)}
    assert [j.hit.passage.id for j in evidence_order(validated)] == ["b", "c", "a"]  # total, then earlier round


@dataclass
class Script:
    """Planner and critic answers by role, in order: the loop's logic, not the model's judgement, under test."""

    plans: list[dict[str, Any]]
    critic: dict[str, tuple[int, int, int, int]]
    sufficient: list[bool]
    tokens: int = 50
    name: str = "script"

    def complete(self, messages: list[dict[str, str]], json_schema: dict[str, Any] | None = None,
                 max_tokens: int = 256, temperature: float = 0.0, seed: int = 0) -> Completion:
        system, user = messages[0]["content"], messages[-1]["content"]
        if system.startswith("You plan retrieval"):
            reply: dict[str, Any] = self.plans.pop(0)
        elif system.startswith("You judge one retrieved passage"):
            passage = next(key for key, text in PASSAGES.items() if text[:40] in user)
            r, u, c, k = self.critic[passage]
            reply = {"critique": f"about {passage}", "relevance": r, "usefulness": u, "clarity_specificity": c,
                     "compatibility": k}
        else:
            reply = {"sufficient": self.sufficient.pop(0), "missing": "the year"}
        return Completion(json.dumps(reply), self.tokens, self.tokens, 1.0, self.name)


PASSAGES = {"en1": "Percy Shelley wrote The Masque of Anarchy after the Peterloo massacre in 1819.",
            "de1": "Percy Shelley schrieb The Masque of Anarchy nach dem Massaker von Peterloo 1819.",
            "en2": "Civil disobedience is the active refusal to obey certain laws of a government.",
            "de2": "Ziviler Ungehorsam ist die aktive Weigerung, bestimmten Gesetzen zu gehorchen."}


class FakeKB:
    name = "kb"
    manifest = a_manifest(languages={"all": {"en": 2, "de": 2}}, detect_languages=["en", "de"])


def search(requests, trace):  # noqa: ANN001, ANN201 - the search stage, over the four passages
    from babelrag.types import Ranking

    (request,) = requests
    ids = [pid for pid in PASSAGES if pid[:2] in request.filter.langs]
    if "1819" in request.text:
        ids.sort(key=lambda pid: not pid.endswith("1"))
    else:
        ids.sort(key=lambda pid: not pid.endswith("2"))
    return Ranking(request.label, "dense", tuple(Hit(Passage(pid, PASSAGES[pid], pid, pid[:2]), 1 - i / 10,
                                                     request.label) for i, pid in enumerate(ids)))


def loop(script: Script, **options: Any):  # noqa: ANN201
    from babelrag.types import Trace

    config = preset_config("coral", {"coral": {"per_round_k": 2, **options}, "country_filter": False})
    trace = Trace()
    ranking = coral.Coral(Models(config, llm=script)).loop(Question("Who wrote the Masque of Anarchy?", "en"), FakeKB(),
                                                          config, trace, search)
    return ranking, next(s.data for s in trace.steps if s.stage == "coral"), trace


def test_loop_accumulates_rewrites_and_stops_when_sufficient() -> None:
    script = Script(plans=[{"corpora": ["en"]},
                           {"corpora": ["de", "en"], "rewrite_type": "narrow", "query": "Masque of Anarchy 1819"}],
                    critic={"en1": (5, 5, 4, 5), "en2": (2, 1, 3, 4), "de1": (5, 5, 5, 5), "de2": (1, 1, 1, 1)},
                    sufficient=[False, True])
    ranking, step, trace = loop(script)
    assert [r["corpora"] for r in step["rounds"]] == [["en"], ["de", "en"]]
    assert step["rounds"][1]["rewrite_type"] == "narrow" and step["rounds"][1]["query_used"] == "Masque of Anarchy 1819"
    assert step["stopped"] == "sufficient" and ranking.scorer == "critic"
    assert [(h.passage.id, h.score) for h in ranking.hits] == [("de1", 20.0), ("en1", 19.0)]  # en2 filtered out
    assert [h[3] for h in step["evidence"]] == [2, 1]  # the round that found each
    assert {c.role for c in trace.llm_calls} == {"planner", "critic", "sufficiency"}
    assert sum(c.role == "critic" for c in trace.llm_calls) == 3  # en1 judged once though found twice
    summary = loop_summary([{"trace": trace.to_dict()}])
    assert summary["rounds_mean"] == 2 and summary["chosen_langs"] == {"en": 0.6667, "de": 0.3333}
    assert summary["evidence_langs"] == {"de": 0.5, "en": 0.5} and summary["rewrites"] == {"narrow": 1}


def test_loop_stops_on_a_repeated_plan_a_budget_and_flags_no_evidence() -> None:
    nothing = {"en1": (2, 2, 2, 2), "en2": (1, 1, 1, 1), "de1": (2, 2, 2, 2), "de2": (1, 1, 1, 1)}
    ranking, step, trace = loop(Script([{"corpora": ["de", "en"]}, {"corpora": ["en", "de"], "rewrite_type": "none"}],
                                       nothing, []))
    assert step["stopped"] == "plan repeated" and not ranking.hits and step["no_evidence"]
    assert not any(c.role == "sufficiency" for c in trace.llm_calls)  # nothing validated: no call needed
    _, step, trace = loop(Script([{"corpora": ["en"]}] * 3, nothing, []), max_tokens=250)
    assert step["stopped"] == "budget:tokens" and step["agent_tokens"] >= 250
    _, step, _ = loop(Script([{"corpora": ["de"]}], nothing, []), critic=False)
    assert step["stopped"] == "no critic" and [h[0] for h in step["evidence"]] == ["de2", "de1"]


def test_unknown_corpora_are_refused_repaired_once_then_reported() -> None:
    judged = dict.fromkeys(PASSAGES, (3, 3, 3, 3))
    _, step, trace = loop(Script([{"corpora": ["sv"]}, {"corpora": ["de"]}], judged, []), critic=False)
    assert step["rounds"][0]["corpora"] == ["de"] and [c.role for c in trace.llm_calls] == ["planner", "planner:repair"]
    _, step, _ = loop(Script([{"corpora": ["sv"]}, {"corpora": ["xx"]}], judged, []), critic=False)
    first = step["rounds"][0]
    assert first["corpora"] == ["en"] and "xx" in first["planner_error"] and "'en' or 'de'" in first["planner_error"]


def test_coral_config_rules() -> None:
    with pytest.raises(ConfigError, match="ranks its evidence itself"):
        preset_config("coral", {"threshold": 0.8})
    with pytest.raises(ConfigError, match="extra_paths"):
        preset_config("chat", {"extra_paths": ["coral"]})
    assert preset_config("coral-select").coral.critic is False


@pytest.fixture(scope="module")
def xquad_kb(tmp_path_factory: pytest.TempPathFactory):
    folder: Path = tmp_path_factory.mktemp("coral")
    files = small_squad(folder / "data", articles=1, paragraphs=3, langs=("de", "en", "tr"))
    index_sources("xq", [str(f) for f in files], str(folder / "store"))
    with KnowledgeBase.open("xq", str(folder / "store")) as kb:
        yield kb


@pytest.mark.slow
def test_coral_with_the_real_small_model(xquad_kb: KnowledgeBase) -> None:
    llm = need_llm()
    question = Question("Wie viele Punkte gab die Verteidigung der Panthers ab?", lang="de")
    config = preset_config("coral", {"llm": llm, "coral": {"rounds": 2}})
    result = Searcher(xquad_kb, config).search(question)
    step = next(s.data for s in result.trace.steps if s.stage == "coral")
    assert 1 <= len(step["rounds"]) <= 2 and step["stopped"] in ("sufficient", "rounds", "plan repeated")
    for entry in step["rounds"]:
        assert set(entry["corpora"]) <= {"de", "en", "tr"} and entry["retrieved"]
        assert all(1 <= s <= 5 for c in entry["critic"] if "scores" in c for s in c["scores"])
    assert [h.passage.id for h in result.evidence.hits] == [e[0] for e in step["evidence"]]
    assert all(h.passage.doc_id.startswith("Super_Bowl_50") for h in result.evidence.hits)
    assert {c.role for c in result.trace.llm_calls} >= {"planner", "critic"}
    answer = Answerer(xquad_kb, preset_config("coral-select", {"llm": llm})).ask(question)
    assert answer.text.strip() and answer.search is not None and answer.search.evidence.hits
    report = markdown({"configs": {"CORAL": {"overall": {"n": 1, "loop": loop_summary(
        [{"trace": result.trace.to_dict()}])}, "cells": []}}, "comparisons": []})
    assert "## Strategy loop" in report
