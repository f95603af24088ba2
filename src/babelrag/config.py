"""Validated search configuration and the named presets built from it.

Every choice the papers and the practitioner compare is one field here, so a preset is just
a set of overrides and ``--set key=value`` (``--set delta.tau_low=0.5`` for nested fields)
changes one thing at a time. Query strategies and scopes are orthogonal to retrieval settings.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from babelrag.errors import ConfigError


class DeltaConfig(BaseModel):
    """DELTA's fused query (SPEC §3.8); defaults are the paper's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tau_low: float = Field(0.6, ge=0, le=1)
    tau_high: float = Field(0.85, ge=0, le=1)
    tau_boost: float = Field(0.7, ge=0, le=1)
    max_chars: int = Field(900, ge=50)
    aliases: int = Field(3, ge=0, le=10)
    english_mode: Literal["paper", "dedupe", "passthrough"] = "paper"
    anchor_language: Literal["query", "locale"] = "query"
    # what the generator is asked: the fused query (its cues at generation are much of the paper's gain)
    # or the question as written
    generator_query: Literal["fused", "original"] = "fused"


class CoralConfig(BaseModel):
    """CORAL's loop (SPEC §3.9). The paper gives no score scale, threshold or round cap: each criterion
    is 1–5, a passage is kept when every criterion reaches ``min_each`` (and the total ``min_total``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rounds: int = Field(3, ge=1, le=10)
    per_round_k: int = Field(5, ge=1, le=50)  # passages retrieved (and critiqued) per round
    evidence_k: int = Field(5, ge=1, le=50)  # validated passages handed on, by total score
    critic: bool = True  # off: the ablations without critique (dynamic corpus selection, + rewriting)
    rewrite: bool = True  # the planner may rewrite the query (from round 2; from round 1 without a critic)
    min_each: int = Field(3, ge=1, le=5)
    min_total: int | None = Field(None, ge=4, le=20)
    max_corpora: int = Field(4, ge=1, le=20)
    passage_chars: int = Field(700, ge=100)  # of each passage the critic reads
    max_tokens: int = Field(12000, ge=100)  # agent tokens per question (planner, critic, sufficiency)
    max_seconds: float = Field(300.0, gt=0)  # agent model seconds per question


class SearchConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # query side: which paths to search
    strategy: str = "as_written"
    extra_paths: tuple[str, ...] = ()  # strategies whose paths join the main ones (e.g. "hyde")
    # monoRAG = query; tRAG = pivot; own = the question's country's local language (CORAL's C_own)
    lang_scope: Literal["all", "query", "pivot", "own", "own+pivot"] = "all"
    pivot: str = "en"
    max_paths: int = Field(3, ge=1, le=10)
    kb_paths: Literal["all", "pivot", "local"] = "all"  # ablation of the KB-language paths
    kb_targets: tuple[str, ...] = ()  # the KB-language paths to search, in order (a tuned profile measures them)
    llm: str = "qwen2.5-coder-0.5b"
    translator: str = "llm"
    hyde_lang: Literal["query", "pivot"] = "query"
    delta: DeltaConfig = DeltaConfig()
    coral: CoralConfig = CoralConfig()
    # retrieval per path
    mode: Literal["keyword", "vector", "hybrid"] = "hybrid"
    # Hybrid arm fusion, chosen on the fusion ladder (`babelrag bench --ladder fusion`): z-scores
    # with the keyword arm at half weight give the best R@1/MRR (pooled XQuAD R@1 0.938 vs 0.898
    # for plain dense); RRF collapses on cross-lingual cells, where BM25 can only add noise.
    fusion: Literal["rrf", "max", "zscore"] = "zscore"
    rrf_k: int = Field(60, ge=1)
    keyword_weight: float = Field(0.5, ge=0)
    candidates: int = Field(50, ge=1, le=1000)
    # auto | none | learned (P(relevant) from both arms' signals: one calibrated scale for thresholds and
    # multi-path max-merge) | learned:default | dense-resort (cosine only: hybrid collapses to dense order; old
    # name "dense") | cross-encoder:PATH. auto, the default: learned wherever a relevance model fits the KB's
    # embedder (measured on every layout: `python benchmarks/default_relevance.py`), else none.
    rerank: str = "auto"
    country_filter: bool = True
    langs: tuple[str, ...] = ()
    # after the paths
    merge: Literal["max", "rrf"] = "max"
    # a number on the reranker's scale, or "auto": the threshold calibrated for the learned model in use
    # (the shipped model's on the shipped dev data; a tuned model's from `babelrag tune`)
    threshold: float | Literal["auto"] | None = None
    # page: one slot per page (its best-scoring passage, e.g. the best language version); threshold and
    # top-k apply after the collapse
    collapse: Literal["none", "page"] = "none"
    k: int = Field(10, ge=1, le=1000)
    # strategy=tuned: a profile file (babelrag tune --out) instead of the one stored with the KB
    profile: str | None = None
    # answer side: the context strategy over the top ``generate_k`` passages, then the generator
    context: str = "multirag"  # none (no retrieval: no-RAG) | multirag | crossrag | dkm | qtt
    generate_k: int = Field(5, ge=1, le=50)
    generator: str | None = None  # the generator LLM (default: ``llm``)
    answer_tokens: int = Field(64, ge=1, le=4096)
    dkm_combine: Literal["sets", "pairs"] = "sets"
    dkm_parts: Literal["both", "translated", "refined"] = "both"  # the paper's ablations
    refiner: str | None = None  # DKM-RAG's rewriter LLM (default: the generator's, SPEC §4.3)
    # the LLM that makes a conversation's follow-up standalone (default: ``llm``); measured on XQuAD
    # follow-ups (benchmarks/conversation.py), the 1.5B model's rewrites help where the 0.5B's are refused
    conversation_llm: str | None = None
    qtt_min_score: float | None = Field(None, ge=0, le=5)  # QTT's hard-filter variant

    @model_validator(mode="after")
    def _scores_need_a_fixed_scale(self) -> SearchConfig:
        fixed_scale = self.rerank != "none" or self.mode == "vector"
        if self.threshold == "auto" and not self.rerank.startswith("learned") and self.rerank != "auto":
            raise ValueError("threshold: auto is the learned relevance model's calibrated τ; use rerank=learned "
                             "or a number")
        if "coral" in self.extra_paths:
            raise ValueError("extra_paths: CORAL loops over its own rounds; use strategy=coral")
        if self.strategy == "coral" and (self.threshold is not None or self.extra_paths):
            raise ValueError("strategy: CORAL ranks its evidence by critic totals and plans its own paths; "
                             "no threshold or extra_paths (use coral.min_each / coral.min_total)")
        if self.threshold is not None and self.merge == "rrf" and self.multi_path():
            raise ValueError("threshold: RRF totals have no fixed meaning; merge=max (one reranker scale) "
                             "or no threshold")
        if self.threshold is not None and not fixed_scale:
            what = f"{self.fusion} fusion totals" if self.mode == "hybrid" else "raw BM25 scores"
            raise ValueError(f"threshold: a threshold on {what} has no fixed meaning; "
                             f"rerank the candidates (rerank=learned) or use mode=vector")
        if self.merge == "max" and self.multi_path() and not fixed_scale:
            raise ValueError("merge: max-merging paths needs one score scale: rerank (rerank=learned) or merge=rrf")
        return self

    def query_uses_llm(self) -> bool:
        """Does finding the evidence call a model (translation, HyDE, DELTA, CORAL, a tuned profile)?"""
        return self.strategy != "as_written" or bool(self.extra_paths)

    def multi_path(self) -> bool:
        """Does it search several paths and merge them?"""
        return self.strategy in ("kb_languages", "tuned") or bool(self.extra_paths)


def make_config(values: dict[str, Any]) -> SearchConfig:
    try:
        return SearchConfig.model_validate(values)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "config"
        raise ConfigError(f"{field}: {first['msg']}") from error


# τ belongs to the model: "auto" takes the one calibrated for the learned model in use (the shipped
# model's on the shipped dev questions, ≤ 0.5 point of Recall@10 lost on new questions; a tuned model's from
# `babelrag tune`).
_TAU = "auto"
_RERANK = "learned"
_CHAT = {"strategy": "kb_languages", "rerank": _RERANK, "merge": "max", "threshold": _TAU, "country_filter": True}

PRESETS: dict[str, dict[str, Any]] = {
    # the blog ladder (SPEC §2), each step changing one thing from the previous one
    "keyword": {"mode": "keyword", "rerank": "none", "country_filter": False},
    "vector": {"mode": "vector", "rerank": "none", "country_filter": False},
    "hybrid": {"mode": "hybrid", "rerank": "none", "country_filter": False},
    "dense-resort": {"mode": "hybrid", "rerank": "dense-resort", "country_filter": False},
    "learned": {"mode": "hybrid", "rerank": _RERANK, "country_filter": False},
    "hybrid+rerank": {"mode": "hybrid", "rerank": _RERANK, "country_filter": False},
    "+threshold": {"mode": "hybrid", "rerank": _RERANK, "threshold": _TAU, "country_filter": False},
    "+country": {"mode": "hybrid", "rerank": _RERANK, "threshold": _TAU, "country_filter": True},
    # the chat configuration (SPEC §3.5): the KB's languages, max-merged reranker scores
    "chat": _CHAT,
    "chat-rrf": {**_CHAT, "merge": "rrf", "threshold": None},
    "hyde": {"strategy": "hyde", "rerank": _RERANK, "threshold": _TAU, "country_filter": True},
    "hyde-extra": {**_CHAT, "extra_paths": ("hyde",)},
    # the profile `babelrag tune` fitted for this KB: per (country, question language) cell its paths and τ
    "tuned": {"strategy": "tuned", "rerank": _RERANK, "merge": "max", "country_filter": True},
    # the papers' query strategies ([RHB], [DELTA])
    "monorag": {"strategy": "as_written", "lang_scope": "query", "rerank": _RERANK},
    "multirag": {"strategy": "as_written", "lang_scope": "all", "rerank": _RERANK},
    "trag": {"strategy": "pivot", "lang_scope": "pivot", "rerank": _RERANK},
    "english-translation": {"strategy": "pivot", "lang_scope": "all", "rerank": _RERANK},
    "delta": {"strategy": "delta", "lang_scope": "all", "rerank": _RERANK},
    # [CORAL]: the fixed scopes it is compared with, its two ablations from MultiRAG, and the full loop
    "fixed-own": {"strategy": "as_written", "lang_scope": "own", "rerank": _RERANK},
    "fixed-own-en": {"strategy": "as_written", "lang_scope": "own+pivot", "rerank": _RERANK},
    "fixed-all": {"strategy": "as_written", "lang_scope": "all", "rerank": _RERANK},
    "coral-select": {"strategy": "coral", "rerank": _RERANK, "coral": {"critic": False, "rewrite": False, "rounds": 1}},
    "coral-rewrite": {"strategy": "coral", "rerank": _RERANK, "coral": {"critic": False, "rewrite": True, "rounds": 1}},
    "coral": {"strategy": "coral", "rerank": _RERANK},
    # the papers' context strategies (SPEC §4); they combine with any of the above: delta+crossrag
    "norag": {"context": "none"},
    "crossrag": {"context": "crossrag"},
    "dkm": {"context": "dkm"},
    "qtt": {"context": "qtt"},
    "qtt-filter": {"context": "qtt", "qtt_min_score": 3.0},
    "default": {},
}


def _merge(base: dict[str, Any], updates: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in updates.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def parse_overrides(pairs: Iterable[str]) -> dict[str, Any]:
    """``key=value`` pairs, values read as YAML scalars (``threshold=0.8``, ``langs=[sv, en]``,
    ``delta.tau_low=0.5``)."""
    overrides: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set '{pair}': expected key=value")
        nested: Any = yaml.safe_load(value) if value.strip() else None
        for part in reversed(key.strip().split(".")[1:]):
            nested = {part: nested}
        overrides = _merge(overrides, {key.strip().split(".")[0]: nested})
    return overrides


def _compose(name: str) -> dict[str, Any]:
    """A preset, or presets joined by "+" (``delta+crossrag``, ``+country+qtt``), merged left to right;
    the longest known name wins at each point, so "+country" and "hybrid+rerank" stay whole."""
    values: dict[str, Any] = {}
    rest = name
    while rest:
        parts = rest.split("+")
        for end in range(len(parts), 0, -1):
            head = "+".join(parts[:end])
            if head in PRESETS:
                values = _merge(values, PRESETS[head])
                rest = "+".join(parts[end:])
                break
        else:
            raise ConfigError(f"preset: unknown '{name}' (known: {', '.join(PRESETS)}, or several joined by '+')")
    return values


def for_country(overrides: dict[str, Any], country: str | None) -> dict[str, Any]:
    """A user who names the question's country means its passages plus global ones, whatever the preset
    (the blog-ladder presets leave the filter off so the benchmark can measure the step that adds it);
    an explicit ``country_filter`` setting still wins. Benchmarks call ``preset_config`` without this."""
    return {"country_filter": True, **overrides} if country else overrides


def preset_config(name: str = "default", overrides: dict[str, Any] | None = None) -> SearchConfig:
    return make_config(_merge(_compose(name), overrides or {}))
