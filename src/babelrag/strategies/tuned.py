"""``strategy=tuned``: the retrieval profile ``babelrag tune`` fitted for this KB, applied per question.

A profile maps each (country × question language) cell to one of a few measured options — the
question as written alone, or with the KB-language translations, the pivot translation or a HyDE
passage beside it — with its own threshold on the learned relevance scale. Cells with too few dev
questions inherit their KB's rule, and KBs the global one (the profile says which rule fired and
the trace records it). It does not plan paths itself: it resolves the question's configuration,
and the search runs that configuration's strategy.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from babelrag.errors import ConfigError, IndexMismatch, shown
from babelrag.models.bundle import Models
from babelrag.registry import STRATEGIES, Facts
from babelrag.search_config import SearchConfig, validated
from babelrag.types import Question

if TYPE_CHECKING:
    from babelrag.kb import KnowledgeBase

FORMAT = 1
ANY = "*"  # a question without a country
# What a cell may choose from: each option is config overrides; LLM calls are what it costs per question.
OPTIONS: dict[str, dict[str, Any]] = {
    "as_written": {"strategy": "as_written", "extra_paths": []},
    "as_written+kb_languages": {"strategy": "kb_languages", "extra_paths": ["as_written"]},
    "as_written+pivot": {"strategy": "pivot", "lang_scope": "all", "extra_paths": ["as_written"]},
    "as_written+hyde": {"strategy": "as_written", "extra_paths": ["hyde"]},
    "kb_languages": {"strategy": "kb_languages", "extra_paths": []},
    "delta": {"strategy": "delta", "extra_paths": []},
    # over the pivot copies made at ingest (`babelrag pivot-copies`): offered only on a KB that has them (the copies
    # alone first: options tied exactly in cost and dev value go to the one listed first, here one path); beside
    # the question rank-fused, as the `pivot-copies-rrf` preset (RRF totals have no fixed meaning: no τ), or
    # max-merged, as the `pivot-copies` preset (the copy path scored as P(relevant) by weights of its own: τ applies)
    "pivot_copies": {"strategy": "pivot_copies", "extra_paths": []},
    "as_written+pivot_copies": {"strategy": "as_written", "extra_paths": ["pivot_copies"], "merge": "rrf"},
    "as_written+pivot_copies:max": {"strategy": "as_written", "extra_paths": ["pivot_copies"], "merge": "max"},
}


def needs_copies(option: str) -> bool:
    """The option searches the KB's pivot copies (a KB without them cannot run it)."""
    chosen = OPTIONS[option]
    return "pivot_copies" in (chosen["strategy"], *chosen["extra_paths"])


class SelectionCheck(BaseModel):
    """Where a rule chose more than the simplest option: what choosing on half the dev questions gained over it on the
    other half (``tune/choose.held_out_gain``), and the choice ``refused`` when that gain was not positive."""
    model_config = ConfigDict(extra="forbid")

    held_out_gain: float
    over: str  # the simplest option, the one the gain is measured against (and fallen back on)
    refused: str | None = None


class CellRule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    option: str
    threshold: float | None = None
    k: int | None = Field(None, ge=1)
    source: Literal["cell", "kb", "global"] = "cell"
    n_dev: int = 0  # the dev questions behind it (a question and its translations once)
    measured: dict[str, float] = Field(default_factory=dict)  # the (shrunk) dev objective of each option
    selection_check: SelectionCheck | None = None  # None: the rule took the simplest option, nothing to check


class Profile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: int = FORMAT
    kb: str
    kb_created_at: str | None = None
    embedder: str
    relevance: dict[str, Any] = Field(default_factory=dict)  # what the model is (name, fitted on, variant)
    model: dict[str, Any] | None = None  # the relevance model itself (rerank: learned reads it)
    objective: str = "mrr"
    budget: dict[str, Any] = Field(default_factory=dict)
    options: dict[str, dict[str, Any]] = Field(default_factory=lambda: dict(OPTIONS))
    global_rule: CellRule
    kbs: dict[str, CellRule] = Field(default_factory=dict)  # by country (ANY: no country)
    cells: dict[str, CellRule] = Field(default_factory=dict)  # by "country|lang"
    targets: dict[str, list[str]] = Field(default_factory=dict)  # by "country|lang": KB-language paths, best first
    # hashes of the dev questions whose results chose its rules: scoring them would flatter it (eval and the
    # bench keep them out of their headline figures)
    tuned_on: list[str] = Field(default_factory=list)

    def rule_for(self, country: str | None, lang: str | None) -> tuple[str, CellRule]:
        """The most specific rule the profile holds for this cell, and the key it was found under."""
        country = country or ANY
        key = f"{country}|{lang}"
        if key in self.cells:
            return key, self.cells[key]
        if country in self.kbs:
            return country, self.kbs[country]
        return "global", self.global_rule

    def check(self, kb: KnowledgeBase) -> None:
        """Refused like a mismatched index: another KB, another build of it, or another embedder."""
        found = [(name, mine, theirs) for name, mine, theirs in (
            ("profile kb", self.kb, kb.name), ("profile kb build", self.kb_created_at, kb.manifest.created_at),
            ("profile embedder", self.embedder, kb.embedder.fingerprint())) if mine != theirs]
        if found:
            raise IndexMismatch(kb.name, found)


def load_profile(kb: KnowledgeBase, path: str | None = None) -> Profile:
    """From ``path`` (a YAML or JSON file, or a folder holding ``<kb>.yaml``) or the profile stored with
    the KB; checked against the KB."""
    try:
        if path:
            file = Path(path) / f"{kb.name}.yaml" if Path(path).is_dir() else Path(path)
            # libyaml's parser when PyYAML has it: a profile carries its model's weights, ~50 ms in pure Python
            raw = yaml.load(file.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        elif kb.manifest.profile:
            raw = kb.manifest.profile
        else:
            raise ConfigError(f"strategy tuned: knowledge base '{kb.name}' has no tuned profile; run "
                              f"`babelrag tune --kb {kb.name} --golden GOLDEN.jsonl` first")
        profile = Profile.model_validate(raw)
    except OSError as error:
        raise ConfigError(f"profile: cannot read {path}: {error.strerror}") from error
    except yaml.YAMLError as error:  # its line, not its text: the parser's message quotes the file
        mark = getattr(error, "problem_mark", None)
        raise ConfigError(f"profile {path or '(stored with the KB)'}: not YAML"
                          f"{f' (line {mark.line + 1})' if mark else ''}") from error
    except ValidationError as error:  # the fields at fault, not the values pydantic would quote
        faults = "; ".join(f"{shown('.'.join(map(str, e['loc']))) or 'the whole file'}: {e['msg']}"
                           for e in error.errors(include_url=False, include_input=False)[:3])
        raise ConfigError(f"profile {path or '(stored with the KB)'}: not a babelrag profile "
                          f"({error.error_count()} faults; {faults})") from error
    profile.check(kb)
    return profile


class TunedParams(BaseModel):
    """A profile file instead of the one stored with the KB."""

    profile: str | None = None


@STRATEGIES.register("tuned", params=TunedParams, facts=Facts(paths="resolved", trace_stages=("resolve",)),
                     about="the profile `babelrag tune` fitted for this KB, per question cell")
class Tuned:
    name = "tuned"

    def __init__(self, models: Models) -> None:
        """Calls no model itself: the configuration it resolves is searched with models of its own."""
        self._profiles: dict[tuple[str, str | None, str | None], Profile] = {}  # read and checked once

    def resolve(self, question: Question, kb: KnowledgeBase, config: SearchConfig) -> tuple[SearchConfig, dict[str, Any]]:
        """The configuration this question's cell was tuned to, and which rule said so."""
        stored = (kb.manifest.profile or {}).get("budget", {}).get("tuned_at")
        key = (kb.name, config.profile, stored)  # a re-tune in between is seen
        if key not in self._profiles:
            self._profiles[key] = load_profile(kb, config.profile)
        profile = self._profiles[key]
        key, rule = profile.rule_for(question.country if config.country_filter else None, question.lang)
        if rule.option not in profile.options:
            raise ConfigError(f"profile: rule {key} names option '{shown(rule.option)}', which the profile does not "
                              f"define")
        values = config.model_dump(mode="json")
        values.update(profile.options[rule.option])
        if values.get("merge") == "rrf":  # RRF totals have no fixed meaning: no threshold
            values["threshold"] = None
        elif config.threshold is None:  # a threshold the user set stands
            values["threshold"] = rule.threshold
        cell = f"{question.country if config.country_filter and question.country else ANY}|{question.lang}"
        values["kb_targets"] = profile.targets.get(cell, [])
        if rule.k is not None:
            values["k"] = min(config.k, rule.k)
        return validated(values), {"rule": key, "source": rule.source, "option": rule.option,
                                     "threshold": values["threshold"], "k": values["k"]}  # as applied


