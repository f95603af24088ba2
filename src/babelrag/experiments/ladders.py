"""Ladders: ordered configurations, each changing one thing from the previous step.

Steps that call an LLM (translation, HyDE, DELTA, answer generation) run on a per-cell sample of
the questions (``llm_per_cell``); every other step runs on all of them. A step's latency is also reported as
a ratio to its ``baseline`` step (default: the previous one).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from babelrag.errors import ConfigError, shown
from babelrag.strategies.tuned import OPTIONS as STRATEGY_OPTIONS, needs_copies


@dataclass(frozen=True)
class Step:
    name: str
    preset: str
    overrides: dict[str, Any] = field(default_factory=dict)
    # take τ from dev traces (docs/methods.md#threshold) instead of the preset's value: ``OWN`` (this step's configuration run
    # on the dev questions without a threshold), an earlier step of the same configuration, or — labelled as
    # reused in the report — another step's τ (LLM steps run on a test sample only)
    calibrate_threshold_from: str | None = None
    baseline: str | None = None
    answer: bool = False  # generate answers and score them (the QA ladders)
    sample: bool = False  # run on the LLM steps' sample even without an LLM (baselines compared with them)
    llm: bool | None = None  # does it call a model? (None: as its configuration says)


_SINGLE = "+country"  # the reranked single path every query strategy is measured against
_TAU = "hybrid+rerank"
OWN = "(own dev rows)"  # calibrate_threshold_from: the step's own configuration on the dev split
_OPTION_NAMES = {"as_written+kb_languages": "+ KB-language paths", "as_written+pivot": "+ English pivot path",
                 "as_written+hyde": "+ HyDE path", "kb_languages": "KB-language paths only", "delta": "DELTA"}
# `bench --ladder tune` fits profiles on the dev split first (babelrag tune, per index) into these folders
PROFILES = "{profiles}"
NO_LLM, WITH_LLM = f"{PROFILES}/no-llm", f"{PROFILES}/llm"
_TUNED = "learned (tuned model)"
_CF = {"country_filter": True}

LADDERS: dict[str, list[Step]] = {
    # [BLOG] §2–3: keyword → vector → hybrid → hybrid+rerank → +threshold → +country filter, then the
    # query strategies against that reranked single path
    "blog": [
        Step("keyword", "keyword"),
        Step("vector", "vector"),
        Step("hybrid", "hybrid"),
        Step("hybrid+rerank", "hybrid+rerank"),
        Step("+threshold", "+threshold", calibrate_threshold_from=_TAU),
        Step("+country", "+country", calibrate_threshold_from=OWN),
        # what `babelrag search` does unless told otherwise (hybrid, the learned stage, the country filter, no τ),
        # against plain dense retrieval on the same questions
        Step("default", "default", baseline="vector"),
        Step("+kb-languages (max)", "chat", calibrate_threshold_from=_SINGLE, baseline=_SINGLE),
        Step("+kb-languages (rrf)", "chat-rrf", baseline=_SINGLE),
        Step("+hyde-extra", "hyde-extra", calibrate_threshold_from=_SINGLE, baseline=_SINGLE),
        Step("trag", "trag", {"country_filter": True}, calibrate_threshold_from=_SINGLE, baseline=_SINGLE),
        Step("delta", "delta", {"country_filter": True}, calibrate_threshold_from=_SINGLE, baseline=_SINGLE),
    ],
    # translation strategies only (one cached LLM call per question serves every step): KB-language
    # paths with max and RRF merges, their per-path ablation, and the English pivot
    "translate": [
        Step("hybrid+rerank", "hybrid+rerank"),
        Step("+country", "+country", calibrate_threshold_from=OWN),
        Step("+kb-languages (max)", "chat", calibrate_threshold_from=_SINGLE, baseline=_SINGLE),
        Step("+kb-languages (rrf)", "chat-rrf", baseline=_SINGLE),
        Step("kb: pivot path only", "chat", {"kb_paths": "pivot"}, calibrate_threshold_from=_SINGLE, baseline=_SINGLE),
        Step("kb: local path only", "chat", {"kb_paths": "local"}, calibrate_threshold_from=_SINGLE, baseline=_SINGLE),
        Step("trag", "trag", {"country_filter": True}, calibrate_threshold_from=_SINGLE, baseline=_SINGLE),
    ],
    # the practitioner's next experiment: which KB-language path carries the gain?
    "kb-paths": [
        Step("hybrid+rerank", "hybrid+rerank"),
        Step("+country", "+country", calibrate_threshold_from=OWN),
        Step("kb: pivot path only", "chat", {"kb_paths": "pivot"}, calibrate_threshold_from=_SINGLE, baseline=_SINGLE),
        Step("kb: local path only", "chat", {"kb_paths": "local"}, calibrate_threshold_from=_SINGLE, baseline=_SINGLE),
        Step("kb: both paths", "chat", calibrate_threshold_from=_SINGLE, baseline=_SINGLE),
    ],
    # end to end (docs/methods.md#qa-ladders): no-RAG → monoRAG → MultiRAG → CrossRAG → DKM-RAG (and its two ablations)
    # → QTT-RAG (and its hard filter); the query strategies of [DELTA]'s Table 5 (tRAG, English
    # translation, DELTA, and DELTA with the original question at generation); then the chat
    # configuration's paths with each context strategy
    "qa": [
        Step("no-RAG", "norag", answer=True),
        Step("monoRAG", "monorag", answer=True),
        Step("MultiRAG", "multirag", answer=True),
        Step("CrossRAG", "multirag+crossrag", answer=True, baseline="MultiRAG"),
        Step("DKM-RAG", "multirag+dkm", answer=True, baseline="MultiRAG"),
        Step("DKM w/o refined", "multirag+dkm", {"dkm_parts": "translated"}, answer=True, baseline="MultiRAG"),
        Step("DKM w/o translated", "multirag+dkm", {"dkm_parts": "refined"}, answer=True, baseline="MultiRAG"),
        Step("QTT-RAG", "multirag+qtt", answer=True, baseline="MultiRAG"),
        Step("QTT-RAG (filter)", "multirag+qtt-filter", answer=True, baseline="MultiRAG"),
        Step("tRAG", "trag", answer=True, baseline="MultiRAG"),
        Step("English Translation", "english-translation", answer=True, baseline="MultiRAG"),
        Step("DELTA", "delta", answer=True, baseline="MultiRAG"),
        Step("DELTA (original query at generation)", "delta", {"delta": {"generator_query": "original"}}, answer=True,
             baseline="DELTA"),
        Step("chat+multirag", "chat", {"threshold": None}, answer=True, baseline="MultiRAG"),
        Step("chat+crossrag", "chat+crossrag", {"threshold": None}, answer=True, baseline="MultiRAG"),
        Step("chat+dkm", "chat+dkm", {"threshold": None}, answer=True, baseline="MultiRAG"),
        Step("chat+qtt", "chat+qtt", {"threshold": None}, answer=True, baseline="MultiRAG"),
    ],
    # [CORAL] (docs/methods.md#coral): the fixed scopes, then from MultiRAG its ablations (dynamic corpus
    # selection, + query rewriting) and the full loop, and the critic threshold either side of the default
    "coral": [
        Step("C_own", "fixed-own", sample=True),
        Step("C_own+C_en", "fixed-own-en", sample=True),
        Step("C_all (MultiRAG)", "fixed-all", sample=True),
        Step("+corpus selection", "coral-select", baseline="C_all (MultiRAG)"),
        Step("+query rewriting", "coral-rewrite", baseline="C_all (MultiRAG)"),
        Step("CORAL", "coral", baseline="C_all (MultiRAG)"),
        Step("CORAL min_each=2", "coral", {"coral": {"min_each": 2}}, baseline="CORAL"),
        Step("CORAL min_total=10", "coral", {"coral": {"min_each": 1, "min_total": 10}}, baseline="CORAL"),
    ],
    # [issue: fix the failing cells] the relevance stage and per-cell tuning, each fitted on dev questions and
    # scored on test: the hybrid order, cosine re-sorting, the shipped and the KB-tuned relevance models, one
    # global τ against per-cell τ, page collapse, and the tuned profile against the best single preset
    "tune": [
        Step("hybrid", "hybrid", _CF),
        Step("dense-resort", "dense-resort", _CF),
        Step("learned (shipped model)", "learned", {**_CF, "rerank": "learned:default"}, baseline="hybrid"),
        Step(_TUNED, "learned", {**_CF, "profile": NO_LLM}, baseline="hybrid"),
        Step("+threshold (global τ)", "+country", {"profile": NO_LLM}, calibrate_threshold_from=_TUNED, baseline=_TUNED),
        Step("per-cell τ", "tuned", {"profile": NO_LLM}, baseline="+threshold (global τ)", llm=False),
        Step("+page collapse", "learned", {**_CF, "profile": NO_LLM, "collapse": "page"}, baseline=_TUNED),
        Step("chat (learned)", "chat", {"profile": NO_LLM, "threshold": None}, baseline=_TUNED),
        Step("tuned", "tuned", {"profile": WITH_LLM}, baseline=_TUNED),
    ],
    # [issue: retrieval that holds when pages are not translations of each other] the default against plain
    # dense and hybrid retrieval, then what each query strategy of the seeds buys beside the question as written
    # (the options `babelrag tune` chooses among, and DELTA), each against the default on the same questions; not
    # the pivot copies, which the benchmark KBs do not have (benchmarks/pivot_copies.py makes and measures them)
    "strategies": [
        Step("vector", "vector", _CF),
        Step("hybrid", "hybrid", _CF),
        Step("default", "default", _CF, baseline="vector"),
        *[Step(_OPTION_NAMES.get(option, option), "learned", {**_CF, **overrides}, baseline="default")
          for option, overrides in STRATEGY_OPTIONS.items() if option != "as_written" and not needs_copies(option)],
        Step("tuned (≤ 1 LLM call)", "tuned", {"profile": WITH_LLM}, baseline="default"),
    ],
    # how to fuse the dense and keyword arms (the choice behind the hybrid default)
    "fusion": [
        Step("vector", "vector"),
        Step("hybrid rrf", "hybrid", {"fusion": "rrf", "keyword_weight": 1.0}),
        Step("hybrid max", "hybrid", {"fusion": "max", "keyword_weight": 1.0}),
        Step("hybrid zscore", "hybrid", {"fusion": "zscore", "keyword_weight": 1.0}),
        Step("hybrid zscore kw=0.5", "hybrid", {"fusion": "zscore", "keyword_weight": 0.5}),
        Step("hybrid zscore kw=0.3", "hybrid", {"fusion": "zscore", "keyword_weight": 0.3}),
    ],
}


def _pick(source: str, names: tuple[str, ...], **changes: Any) -> list[Step]:
    return [replace(step, **changes) for step in LADDERS[source] if step.name in names]


# the six papers' steps only: what `bench --qa --quick` runs
LADDERS["qa-core"] = _pick("qa", ("no-RAG", "monoRAG", "MultiRAG", "CrossRAG", "DKM-RAG", "QTT-RAG"))
# [DELTA]'s Table 5: MultiRAG and the context strategies against English translation and DELTA
LADDERS["qa-delta"] = _pick("qa", ("MultiRAG", "CrossRAG", "DKM-RAG", "QTT-RAG", "English Translation", "DELTA",
                                   "DELTA (original query at generation)"))
# [RHB]'s four settings only (no evidence translation beyond CrossRAG): the cheap ordering check
LADDERS["qa-rhb"] = _pick("qa", ("no-RAG", "monoRAG", "MultiRAG", "CrossRAG"))
# CORAL with answers (QA metrics): the generator reads each step's top five
LADDERS["coral-qa"] = _pick("coral", ("C_own", "C_all (MultiRAG)", "+corpus selection", "CORAL", "CORAL min_total=10"),
                            answer=True, sample=False)


def ladder(name: str) -> list[Step]:
    if name not in LADDERS:
        raise ConfigError(f"ladder: unknown '{shown(name)}' (known: {', '.join(LADDERS)})")
    return LADDERS[name]
