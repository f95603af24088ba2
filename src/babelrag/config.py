"""Parsing a search configuration: fields, method names and the methods' own rules; the named presets.

Every choice the papers and the practitioner compare is one field (``search_config.SearchConfig``), so a
preset is just a set of overrides and ``--set key=value`` (``--set delta.tau_low=0.5`` for nested fields)
changes one thing at a time. Names of methods (strategy, extra_paths, context, rerank, translator, the LLMs)
are checked here against the registries, before anything is searched, and each method's rules come from
its registered facts (how many paths it plans, whether it ranks its own evidence), never from its name.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml

from babelrag.config_sections import NO_CONTEXT, flat_values  # imports every method: the registries are complete
from babelrag.errors import ConfigError, shown
from babelrag.models.llm import check_llm
from babelrag.registry import CONTEXTS, RERANKERS, STRATEGIES, TRANSLATORS, Facts
from babelrag.search_config import CoralConfig, DeltaConfig, SearchConfig, validated

__all__ = ["PRESETS", "CoralConfig", "DeltaConfig", "SearchConfig", "finding_calls_llm", "for_country",
           "context_facts", "make_config", "parse_overrides", "plans_several_paths", "preset_config"]

AUTO_RERANK = "auto"  # the learned reranker wherever a relevance model fits the KB (retrieve/pipeline.py)
CONTEXT_CHOICES = (NO_CONTEXT, *CONTEXTS.names())


def _strategies(config: SearchConfig) -> list[Facts]:
    return [STRATEGIES.facts(name) for name in (config.strategy, *config.extra_paths)]


def plans_several_paths(config: SearchConfig) -> bool:
    """Does it search several paths and merge them?"""
    return bool(config.extra_paths) or STRATEGIES.facts(config.strategy).paths in ("several", "resolved")


def finding_calls_llm(config: SearchConfig) -> bool:
    """Does finding the evidence call a model (translation, HyDE, DELTA, CORAL, a tuned profile)?"""
    return any(f.calls_llm or f.paths == "resolved" for f in _strategies(config))


def context_facts(name: str) -> Facts:
    """What the context strategy ``name`` costs; no context (no-RAG) calls nothing but the generator."""
    return Facts(max_passages=10) if name == NO_CONTEXT else CONTEXTS.facts(name)


def _check_names(config: SearchConfig) -> None:
    STRATEGIES.entry(config.strategy)
    for name in config.extra_paths:
        paths = STRATEGIES.entry(name, "extra_paths").facts.paths
        if paths in ("own", "resolved"):  # a loop or a per-question choice of configuration plans no paths
            why = "loops over its own rounds" if paths == "own" else "chooses a configuration per question"
            raise ConfigError(f"extra_paths: {name} {why}; use strategy={name}")
    if config.context != NO_CONTEXT:
        CONTEXTS.entry(config.context, also=(NO_CONTEXT,))
    if config.rerank != AUTO_RERANK:
        RERANKERS.entry(config.rerank, also=(AUTO_RERANK,))
    TRANSLATORS.entry(config.translator)
    for field in ("llm", "generator", "refiner", "conversation_llm"):
        if (spec := getattr(config, field)) is not None:
            check_llm(spec, field)


def _check_rules(config: SearchConfig) -> None:
    """The methods' own rules, read from their facts."""
    if STRATEGIES.facts(config.strategy).paths == "own" and (config.threshold is not None or config.extra_paths):
        raise ConfigError(f"strategy: {config.strategy} ranks its evidence itself and plans its own paths; "
                          f"no threshold or extra_paths")
    several = plans_several_paths(config)
    if config.threshold is not None and config.merge == "rrf" and several:
        raise ConfigError("threshold: RRF totals have no fixed meaning; merge=max (one reranker scale) "
                          "or no threshold")
    if config.merge == "max" and several and not config.fixed_scale():
        raise ConfigError("merge: max-merging paths needs one score scale: rerank (rerank=learned) or merge=rrf")


def make_config(values: dict[str, Any]) -> SearchConfig:
    """A configuration from plain values, flat or in sections (``config_sections``): fields, then method
    names, then the methods' rules."""
    config = validated(flat_values(values))
    _check_names(config)
    _check_rules(config)
    return config


# τ belongs to the model: "auto" takes the one calibrated for the learned model in use (the shipped
# model's on the shipped dev questions, ≤ 0.5 point of Recall@10 lost on new questions; a tuned model's from
# `babelrag tune`).
_TAU = "auto"
_RERANK = "learned"
_CHAT = {"strategy": "kb_languages", "rerank": _RERANK, "merge": "max", "threshold": _TAU, "country_filter": True}

PRESETS: dict[str, dict[str, Any]] = {
    # the blog ladder (docs/methods.md#dkm-rag), each step changing one thing from the previous one
    "keyword": {"mode": "keyword", "rerank": "none", "country_filter": False},
    "vector": {"mode": "vector", "rerank": "none", "country_filter": False},
    "hybrid": {"mode": "hybrid", "rerank": "none", "country_filter": False},
    "dense-resort": {"mode": "hybrid", "rerank": "dense-resort", "country_filter": False},
    "learned": {"mode": "hybrid", "rerank": _RERANK, "country_filter": False},
    "hybrid+rerank": {"mode": "hybrid", "rerank": _RERANK, "country_filter": False},
    "+threshold": {"mode": "hybrid", "rerank": _RERANK, "threshold": _TAU, "country_filter": False},
    "+country": {"mode": "hybrid", "rerank": _RERANK, "threshold": _TAU, "country_filter": True},
    # the chat configuration (docs/methods.md#dkm-rag): the KB's languages, max-merged reranker scores
    "chat": _CHAT,
    "chat-rrf": {**_CHAT, "merge": "rrf", "threshold": None},
    "hyde": {"strategy": "hyde", "rerank": _RERANK, "threshold": _TAU, "country_filter": True},
    "hyde-extra": {**_CHAT, "extra_paths": ("hyde",)},
    # the question over the pivot copies made at ingest (`babelrag pivot-copies`) beside it, max-merged: the learned
    # stage gives the copy path weights and a calibration of its own, so both paths score P(relevant); max beat RRF on
    # the dev articles of scattered and unique-country with either translator (docs/methods.md#pivot-copies).
    # ``-rrf``: rank-fused, for a KB without a relevance model for its embedder (max-merging needs one scale)
    "pivot-copies": {"extra_paths": ("pivot_copies",), "merge": "max"},
    "pivot-copies-rrf": {"extra_paths": ("pivot_copies",), "merge": "rrf"},
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
    # the papers' context strategies (docs/methods.md#dkm-rag); they combine with any of the above: delta+crossrag
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
            raise ConfigError(f"--set '{shown(pair)}': expected key=value")
        try:
            nested: Any = yaml.safe_load(value) if value.strip() else None
        except yaml.YAMLError:
            raise ConfigError(f"--set {key.strip()[:60]}: the value is not a YAML scalar or list") from None
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
            raise ConfigError(f"preset: unknown '{shown(name)}' (known: {', '.join(PRESETS)}, or several joined by '+')")
    return values


def for_country(overrides: dict[str, Any], country: str | None) -> dict[str, Any]:
    """A user who names the question's country means its passages plus global ones, whatever the preset
    (the blog-ladder presets leave the filter off so the benchmark can measure the step that adds it);
    an explicit ``country_filter`` setting still wins. Benchmarks call ``preset_config`` without this."""
    return {"country_filter": True, **overrides} if country else overrides


def preset_config(name: str = "default", overrides: dict[str, Any] | None = None) -> SearchConfig:
    """A preset (or presets joined by "+") with ``overrides`` on top, every field and name checked."""
    return make_config(_merge(_compose(name), overrides or {}))
