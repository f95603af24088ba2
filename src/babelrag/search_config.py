"""The search configuration's fields and the checks that need no method's facts.

This module sits below the query and context strategies, which read a ``SearchConfig``; the names in it
(``strategy``, ``context``, ``rerank``, …) are checked against the registries one layer up, in
``babelrag.config``, where every configuration from a user is parsed.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from babelrag.errors import ConfigError, shown


class DeltaConfig(BaseModel):
    """DELTA's fused query (docs/methods.md#delta); defaults are the paper's."""

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
    """CORAL's loop (docs/methods.md#coral). The paper gives no score scale, threshold or round cap: each criterion
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
    # candidates the learned stage also weighs from a third, candidates-only dense query: the question with its
    # language's centroid taken out (store/language_vectors.py). On a KB crowded by the question's own language the
    # dense arm's top ``candidates`` can hold no page in any other language; this one does (held-out skewed-local,
    # three in four pages Chinese: Chinese questions whose page is in another language 0.238 → 0.919 MRR@10, those
    # whose page is Chinese 0.956 → 0.904; the README's learned-relevance section). 0: off. Only where the learned stage
    # reranks (it reads the centred cosine); the arms' fusion and scores are untouched.
    centred_candidates: int = Field(5, ge=0, le=1000)
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
    refiner: str | None = None  # DKM-RAG's rewriter LLM (default: the generator's, docs/methods.md#dkm-rag)
    # the LLM that makes a conversation's follow-up standalone (default: ``llm``); measured on XQuAD
    # follow-ups (benchmarks/conversation.py), the 1.5B model's rewrites help where the 0.5B's are refused
    conversation_llm: str | None = None
    qtt_min_score: float | None = Field(None, ge=0, le=5)  # QTT's hard-filter variant

    @field_validator("extra_paths", mode="before")
    @classmethod
    def _one_name_is_a_list_of_one(cls, value: Any) -> Any:
        """``--set extra_paths=hyde`` means ``[hyde]``."""
        return (value,) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _scores_need_a_fixed_scale(self) -> SearchConfig:
        fixed_scale = self.fixed_scale()
        if self.threshold == "auto" and not self.rerank.startswith("learned") and self.rerank != "auto":
            raise ValueError("threshold: auto is the learned relevance model's calibrated τ; use rerank=learned "
                             "or a number")
        if self.threshold is not None and not fixed_scale:
            what = f"{self.fusion} fusion totals" if self.mode == "hybrid" else "raw BM25 scores"
            raise ValueError(f"threshold: a threshold on {what} has no fixed meaning; "
                             f"rerank the candidates (rerank=learned) or use mode=vector")
        return self

    def fixed_scale(self) -> bool:
        """Do scores mean the same on every path (a reranker's scale, or plain cosines)?"""
        return self.rerank != "none" or self.mode == "vector"


def validated(values: dict[str, Any]) -> SearchConfig:
    """The fields checked, one ``ConfigError`` naming the first bad one; names of methods are checked in
    ``babelrag.config.make_config``."""
    try:
        return SearchConfig.model_validate(values)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(shown(p) for p in first["loc"]) or "config"  # a key the user wrote, cut
        raise ConfigError(f"{field}: {first['msg']}") from error
