"""Ladders: ordered configurations, each changing one thing from the previous step.

Later issues append their presets (translation paths, HyDE, DELTA, CORAL…) as new steps or
ladders; the runner, the metrics and the report need no change.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from babelrag.errors import ConfigError


@dataclass(frozen=True)
class Step:
    name: str
    preset: str
    overrides: dict[str, Any] = field(default_factory=dict)
    # take τ from this earlier step's traces (SPEC §2.2), instead of the preset's value
    calibrate_threshold_from: str | None = None


LADDERS: dict[str, list[Step]] = {
    # [BLOG] §2: keyword → vector → hybrid → hybrid+rerank → +threshold → +country filter
    "blog": [
        Step("keyword", "keyword"),
        Step("vector", "vector"),
        Step("hybrid", "hybrid"),
        Step("hybrid+rerank", "hybrid+rerank"),
        Step("+threshold", "+threshold", calibrate_threshold_from="hybrid+rerank"),
        Step("+country", "+country", calibrate_threshold_from="hybrid+rerank"),
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


def ladder(name: str) -> list[Step]:
    if name not in LADDERS:
        raise ConfigError(f"ladder: unknown '{name}' (known: {', '.join(LADDERS)})")
    return LADDERS[name]
