"""CORAL ([CORAL]; docs/methods.md#coral): a planner picks the corpora (and may rewrite the query), a critic scores
what they return, survivors accumulate, and a sufficiency check decides whether to go round again.

Unlike the other strategies it cannot plan its paths up front: each round depends on what the
last one found, so it drives the normal search stage through ``search`` and returns the
validated evidence ranked by the critic's total. Every agent call is an ``LLMCall`` in the trace
(roles planner, critic, sufficiency); the loop's decisions are one ``coral`` step.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, create_model

from babelrag.lang.detect import detector
from babelrag.lang.languages import language_name
from babelrag.models.bundle import Models
from babelrag.models.llm import LLM, LLMError
from babelrag.models.structured import complete_json
from babelrag.registry import STRATEGIES, Facts
from babelrag.search_config import CoralConfig, SearchConfig
from babelrag.strategies.scope import kb_languages
from babelrag.types import Hit, PassageFilter, Question, Ranking, SearchRequest, Trace

if TYPE_CHECKING:
    from babelrag.kb import KnowledgeBase

SearchPaths = Callable[[list[SearchRequest], Trace], Ranking]
RewriteType = Literal["none", "paraphrase", "narrow", "expand"]

PLANNER = """You plan retrieval for a question over a knowledge base split into corpora, one per language.
Choose the corpora to search: mainly the corpus in the question's language; add the corpus of the culture or
region the question is about when it has cultural or regional cues (local institutions, conventions, places,
people), and English as a broad back-up. Choose at most {most} corpora, only from the list given.{countries}{rewrite}
Reply with JSON only."""
COUNTRIES = """
The knowledge base is also split by country. Choose the countries the question is about, or none to search all."""
REWRITE = """
You may rewrite the search query: "paraphrase" (retrieval-friendlier, same intent), "narrow" (add the constraint
or disambiguation that is missing), "expand" (broaden it to find more evidence), or "none" (keep it). A rewrite
may be written in the language of a selected corpus; it must keep the question's intent."""
REVISE = """
The last search was judged insufficient. Revise the plan from the critique: expand to culturally adjacent corpora
to recover local evidence, or narrow the selection to cut noise."""

CRITIC = """You judge one retrieved passage as evidence for answering a question. First write one short
critique: quote the words of the passage that bear on the question, or say that it is off-topic. Then score
each criterion from 1 to 5:
- relevance: 5 = about exactly what the question asks; 3 = same topic, other details; 1 = another topic;
- usefulness: 5 = the passage states the answer; 3 = it helps but does not state it; 1 = no help;
- clarity_specificity: 5 = precise and specific on the point asked; 1 = vague or off the point;
- compatibility: 5 = same language or a faithful equivalent and matching cultural assumptions; 1 = mismatched.
Reply with JSON only."""

SUFFICIENCY = """You decide whether the validated evidence is enough to answer the question. It is not enough
when key constraints of the question are missing, the passages conflict, or they fit the question's language
or culture poorly. Reply with JSON only: sufficient (true or false) and missing (what is still needed, a few
words; empty when sufficient)."""


class CriticScores(BaseModel):
    # The critique comes first, so the scores follow from quoted evidence. Measured on the 1.5B model:
    # scores first gave 5s to every passage; a critique first without anchored scales gave 1s to every one.
    critique: str = Field(min_length=3, max_length=200)
    relevance: int = Field(ge=1, le=5)
    usefulness: int = Field(ge=1, le=5)
    clarity_specificity: int = Field(ge=1, le=5)
    compatibility: int = Field(ge=1, le=5)

    @property
    def criteria(self) -> tuple[int, int, int, int]:
        return self.relevance, self.usefulness, self.clarity_specificity, self.compatibility


class Sufficiency(BaseModel):
    sufficient: bool
    missing: str = Field("", max_length=200)


def plan_model(langs: list[str], countries: list[str], most: int, rewrite: bool) -> type[BaseModel]:
    """The planner's schema with the KB's corpora as enums: constrained decoding cannot name an unknown
    corpus, and a remote model that does is rejected with the allowed values (then repaired once)."""
    fields: dict[str, Any] = {"corpora": (list[Literal[tuple(langs)]], Field(min_length=1, max_length=most))}
    if countries:
        fields["countries"] = (list[Literal[tuple(countries)]], Field(default_factory=list, max_length=len(countries)))
    if rewrite:
        fields["rewrite_type"] = (RewriteType, "none")
        fields["query"] = (str, Field("", max_length=300))
    return create_model("CorpusPlan", **fields)


@dataclass
class Judged:
    hit: Hit
    scores: CriticScores
    round: int

    @property
    def total(self) -> int:
        return sum(self.scores.criteria)


def passes(scores: CriticScores, min_each: int, min_total: int | None) -> bool:
    return min(scores.criteria) >= min_each and (min_total is None or sum(scores.criteria) >= min_total)


def evidence_order(validated: dict[str, Judged]) -> list[Judged]:
    """By total score; ties go to the earlier round, then to the retriever's order."""
    order = {pid: i for i, pid in enumerate(validated)}
    return sorted(validated.values(), key=lambda j: (-j.total, j.round, order[j.hit.passage.id]))


class Budget:
    """Agent tokens and model seconds since the loop began; cached calls count at their original cost,
    so a replay from the cache stops where the original run stopped."""

    def __init__(self, trace: Trace, max_tokens: int, max_seconds: float):
        self.trace, self.start, self.max_tokens, self.max_seconds = trace, len(trace.llm_calls), max_tokens, max_seconds

    def spent(self) -> tuple[int, float]:
        calls = self.trace.llm_calls[self.start:]
        return sum(c.prompt_tokens + c.completion_tokens for c in calls), sum(c.seconds for c in calls)

    def exhausted(self) -> str | None:
        tokens, seconds = self.spent()
        return "budget:tokens" if tokens >= self.max_tokens else "budget:seconds" if seconds >= self.max_seconds else None


def _same_search(plan: dict[str, Any], query: str, last: dict[str, Any]) -> bool:
    return (set(plan["corpora"]), set(plan.get("countries") or ()), query) == \
        (set(last["corpora"]), set(last.get("countries") or ()), last["query_used"])


def _clip(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[:chars].rsplit(" ", 1)[0] + " …"


class CoralParams(BaseModel):
    """CORAL's rounds, critic and budget (docs/methods.md#coral)."""

    coral: CoralConfig = CoralConfig()


_DEFAULT = CoralConfig()


# per round a plan, a critique per passage and a sufficiency check, at the default rounds and passages
@STRATEGIES.register("coral", params=CoralParams,
                     facts=Facts(paths="own", llm_calls_per_question=_DEFAULT.rounds * (2 + _DEFAULT.per_round_k),
                                 trace_stages=("coral",), seconds_budget="coral.max_seconds"),
                     about="CORAL's agent loop: plan, retrieve, critique, until the evidence suffices")
class Coral:
    name = "coral"

    def __init__(self, models: Models):
        self.models = models

    def loop(self, question: Question, kb: KnowledgeBase, config: SearchConfig, trace: Trace,
             search: SearchPaths) -> Ranking:
        options = config.coral
        llm = self.models.llm
        budget = Budget(trace, options.max_tokens, options.max_seconds)
        fixed_country = question.country if config.country_filter else None
        manifest = kb.manifest
        langs = kb_languages(manifest, fixed_country, config.pivot)
        countries = [] if fixed_country else sorted(manifest.languages.countries)
        detect = detector(tuple(manifest.detect_languages))
        validated: dict[str, Judged] = {}
        judged: dict[str, CriticScores] = {}  # the critic judges against the question: once per passage
        query, last = question.text, Ranking("coral", "none")
        rounds: list[dict[str, Any]] = []
        stopped = "rounds"
        with trace.step("coral", self.name, langs=langs, countries=countries) as record:
            for number in range(1, options.rounds + 1):
                if (stopped_by := budget.exhausted()) is not None:
                    stopped = stopped_by
                    break
                revise = rounds[-1] if rounds else None
                rewrite = options.rewrite and (revise is not None or not options.critic)
                plan = self._plan(llm, question, query, langs, countries, options.max_corpora, rewrite, revise, trace)
                if plan.get("rewrite_type", "none") != "none" and plan.get("query", "").strip():
                    query = plan["query"].strip()
                if revise is not None and _same_search(plan, query, revise):
                    stopped = "plan repeated"  # the same search again would find the same passages
                    break
                query_lang = question.lang if query == question.text else detect.detect(query)[0]
                last = self._retrieve(query, query_lang, plan["corpora"], plan.get("countries") or [fixed_country],
                                      number, kb, options.per_round_k, trace, search, query != question.text)
                entry = {"round": number, **plan, "query_used": query, "query_lang": query_lang,
                         "retrieved": [[h.passage.id, h.passage.lang, round(float(h.score), 5)] for h in last.hits]}
                rounds.append(entry)
                if not options.critic:
                    stopped = "no critic"
                    break
                entry["critic"], stopped_by = self._critique(llm, question, last.hits, judged, validated, number, options,
                                                             budget, trace)
                if stopped_by:
                    stopped = stopped_by
                    break
                verdict = self._sufficient(llm, question, evidence_order(validated)[:options.evidence_k], trace)
                if verdict is None:
                    entry.update(sufficient=None, missing="")
                    stopped = "sufficiency failed"
                    break
                entry.update(sufficient=verdict.sufficient, missing=verdict.missing)
                if verdict.sufficient:
                    stopped = "sufficient"
                    break
            if options.critic:
                chosen = evidence_order(validated)[:options.evidence_k]
                hits = tuple(replace(j.hit, score=float(j.total), path=f"coral:r{j.round}") for j in chosen)
                ranking = Ranking("coral", "critic", hits)
            else:
                ranking = Ranking("coral", last.scorer, tuple(replace(h, path=f"coral:r{len(rounds)}")
                                                              for h in last.hits[:options.evidence_k]))
            tokens, seconds = budget.spent()
            record.update(rounds=rounds, stopped=stopped, validated=len(validated), no_evidence=not ranking.hits,
                          evidence=[[h.passage.id, h.passage.lang, h.score, int(h.path.rsplit("r", 1)[-1])]
                                    for h in ranking.hits],
                          agent_tokens=tokens, agent_seconds=round(seconds, 3))
        return ranking

    def _plan(self, llm: LLM, question: Question, query: str, langs: list[str], countries: list[str], most: int,
              rewrite: bool, revise: dict[str, Any] | None, trace: Trace) -> dict[str, Any]:
        """A validated plan; a planner that fails twice falls back to the question's corpus (or all), reported."""
        system = PLANNER.format(most=most, countries=COUNTRIES if countries else "",
                                rewrite=(REVISE if revise else "") + (REWRITE if rewrite else ""))
        lines = [f"Question ({language_name(question.lang or 'en')}): {question.text}",
                 "Available corpora: " + ", ".join(f"{lang} ({language_name(lang)})" for lang in langs)]
        if countries:
            lines.append("Countries: " + ", ".join(countries))
        if revise:
            lines += [f"Previous corpora: {', '.join(revise['corpora'])}", f"Previous query: {query}",
                      "Critique of what it found:",
                      *[f"- [{c['lang']}] {c['critique']} (total {c['total']}/20)" for c in revise.get("critic", [])],
                      f"Still missing: {revise.get('missing') or 'unclear'}"]
        messages = [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]
        schema = plan_model(langs, countries, min(most, len(langs)), rewrite)
        try:
            plan = complete_json(llm, messages, schema, role="planner", trace=trace, max_tokens=160).model_dump()
        except LLMError as error:
            fallback = [question.lang] if question.lang in langs else langs[:most]
            trace.fail("planner", str(error), f"searched {', '.join(fallback)}")
            return {"corpora": fallback, "planner_error": str(error)}
        plan["corpora"] = list(dict.fromkeys(plan["corpora"]))
        return plan

    def _retrieve(self, query: str, query_lang: str | None, corpora: list[str], countries: list[str | None],
                  number: int, kb: KnowledgeBase, k: int, trace: Trace, search: SearchPaths,
                  rewritten: bool = False) -> Ranking:
        """One path per selected country (one path when the scope is fixed), merged as configured."""
        requests = [SearchRequest(query, kb.name, query_lang, PassageFilter(country=country, langs=tuple(corpora)),
                                  f"coral:r{number}" + (f":{country}" if len(countries) > 1 else ""),
                                  origin="generated" if rewritten else "as_written")
                    for country in dict.fromkeys(countries)]
        merged = search(requests, trace)
        return replace(merged, hits=merged.hits[:k])

    def _critique(self, llm: LLM, question: Question, hits: tuple[Hit, ...], judged: dict[str, CriticScores],
                  validated: dict[str, Judged], number: int, options: CoralConfig, budget: Budget,
                  trace: Trace) -> tuple[list[dict[str, Any]], str | None]:
        records = []
        for hit in hits:
            pid = hit.passage.id
            if pid not in judged:
                if (stopped := budget.exhausted()) is not None:
                    return records, stopped
                messages = [{"role": "system", "content": CRITIC}, {"role": "user", "content":
                            f"Question ({language_name(question.lang or 'en')}): {question.text}\n\n"
                            f"Passage ({language_name(hit.passage.lang)}; {hit.passage.title}): "
                            f"{_clip(hit.passage.text, options.passage_chars)}"}]
                try:
                    judged[pid] = complete_json(llm, messages, CriticScores, role="critic", trace=trace, max_tokens=120)
                except LLMError as error:  # an unjudged passage is not evidence
                    trace.fail("critic", f"passage {pid}: {error}", "passage not validated")
                    records.append({"id": pid, "lang": hit.passage.lang, "error": str(error), "kept": False,
                                    "total": 0, "critique": "unjudged"})
                    continue
            scores = judged[pid]
            kept = passes(scores, options.min_each, options.min_total)
            if kept and pid not in validated:  # accumulated across rounds, from the round that first found it
                validated[pid] = Judged(hit, scores, number)
            records.append({"id": pid, "doc_id": hit.passage.doc_id, "lang": hit.passage.lang,
                            "scores": list(scores.criteria),
                            "total": sum(scores.criteria), "kept": kept, "critique": scores.critique})
        return records, None

    def _sufficient(self, llm: LLM, question: Question, evidence: list[Judged], trace: Trace) -> Sufficiency | None:
        if not evidence:  # nothing validated cannot be enough; no call needed to say so
            return Sufficiency(sufficient=False, missing="no passage passed the critic")
        listed = "\n".join(f"[{i}] ({j.hit.passage.lang}, {j.total}/20) {_clip(j.hit.passage.text, 400)}"
                           for i, j in enumerate(evidence, start=1))
        messages = [{"role": "system", "content": SUFFICIENCY},
                    {"role": "user", "content": f"Question: {question.text}\n\nEvidence:\n{listed}"}]
        try:
            return complete_json(llm, messages, Sufficiency, role="sufficiency", trace=trace, max_tokens=80)
        except LLMError as error:  # unjudged is not "sufficient": the loop stops and says why
            trace.fail("sufficiency", str(error), "loop stopped with the evidence validated so far")
            return None
