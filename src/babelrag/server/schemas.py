"""Request bodies, validated before anything runs. Clients choose presets and a whitelist of settings;
nothing a client sends can name a file on the server (no reranker, model or translator paths), and
every setting a client may change is bounded: the work one request can cause is capped. A number
must be a JSON number of the field's kind — ``"1000"`` or ``1000.0`` for ``k`` slipped past the integer
caps before — and a country an ISO 3166 alpha-2 code. Messages name the setting, never echo the input."""
from __future__ import annotations

import re
from functools import cache
from typing import Any, Literal, get_origin

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from babelrag.codes import iso_country, iso_language
from babelrag.config import AUTO_RERANK, SearchConfig, context_facts, for_country, make_config, preset_config
from babelrag.errors import ConfigError
from babelrag.registry import RERANKERS, STRATEGIES

KB_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"
LANG = r"^[a-z]{2,3}$"
# what one client request may ask for at most (the operator's own config is not bounded by these)
LIMITS = {"candidates": 200, "k": 100, "max_paths": 4, "extra_paths": 2, "langs": 12, "answer_tokens": 512}
# what clients may pick, from the registered facts: a method that is not open to clients says so itself
EXTRA_PATHS = {e.name for e in STRATEGIES.entries() if e.facts.client_choosable}
CLIENT_RERANKERS = (AUTO_RERANK, *(name for e in RERANKERS.entries() if e.facts.client_choosable
                                  for name in (e.name, *e.aliases)))
# fields a client may change; the model, translator, reranker paths and generator stay the server's
CLIENT_SETTINGS = {"mode", "fusion", "keyword_weight", "candidates", "rerank", "threshold", "k", "country_filter",
                   "langs", "merge", "strategy", "extra_paths", "lang_scope", "max_paths", "kb_paths", "context",
                   "generate_k", "answer_tokens", "dkm_combine", "dkm_parts", "qtt_min_score", "hyde_lang", "delta",
                   "pivot"}


def country_code(value: str | None) -> str | None:
    """An ISO 3166 alpha-2 code, any case, as the upper-case code; anything else refused."""
    if value is None:
        return None
    if not (isinstance(value, str) and iso_country(value)):
        raise ValueError("an ISO 3166 alpha-2 country code (e.g. \"SE\")")
    return value.upper()


def language_code(value: str | None) -> str | None:
    """An ISO 639 code (``index`` demands the same), as babelrag stores it; anything else refused."""
    if value is None:
        return None
    code = iso_language(value) if isinstance(value, str) and re.fullmatch(LANG, value) else None
    if code is None:
        raise ValueError("an ISO 639 language code (e.g. \"sv\")")
    return code


class Turn(BaseModel):
    """An earlier turn of a conversation (``/ask``'s ``history``)."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["user", "assistant"]
    content: str = Field(min_length=1, max_length=2000)


@cache
def _strict(model: type[BaseModel], name: str) -> TypeAdapter:
    return TypeAdapter(model.model_fields[name].annotation, config=ConfigDict(strict=True))


def check_kinds(values: dict[str, Any], model: type[BaseModel] = SearchConfig, prefix: str = "") -> None:
    """Each setting's value of its field's JSON kind: integers where the field is an integer, finite
    numbers where it is a float, true/false, one of the allowed words; nested settings the same."""
    for name, value in values.items():
        if name not in model.model_fields:
            continue  # an unknown name is the caller's to refuse
        annotation = model.model_fields[name].annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if not isinstance(value, dict):
                raise ValueError(f"{prefix}{name}: an object of settings")
            if unknown := set(value) - set(annotation.model_fields):
                raise ValueError(f"{prefix}{name}: {len(unknown)} unknown setting(s); known: "
                                 f"{', '.join(annotation.model_fields)}")
            check_kinds(value, annotation, f"{prefix}{name}.")
        elif get_origin(annotation) is not tuple:  # lists are checked item by item by their own rules
            try:
                _strict(model, name).validate_python(value)
            except ValidationError as error:
                raise ValueError(f"{prefix}{name}: {error.errors(include_input=False)[0]['msg']}") from None


class SearchBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kb: str = Field(pattern=KB_PATTERN)
    question: str = Field(min_length=1, max_length=2000)
    lang: str | None = Field(None, pattern=LANG)
    country: str | None = None
    preset: str = Field("default", min_length=1, max_length=64, pattern=r"^[A-Za-z0-9+._-]+$")
    settings: dict[str, Any] = Field(default_factory=dict)

    @field_validator("country")
    @classmethod
    def _iso_country(cls, value: str | None) -> str | None:
        return country_code(value)

    @field_validator("lang")
    @classmethod
    def _iso_language(cls, value: str | None) -> str | None:
        return language_code(value)

    @field_validator("settings")
    @classmethod
    def _whitelisted(cls, value: dict[str, Any]) -> dict[str, Any]:
        if unknown := set(value) - CLIENT_SETTINGS:
            named = sorted(unknown & set(SearchConfig.model_fields))  # a field name is ours to repeat
            raise ValueError(f"not open to clients: {', '.join(named) or f'{len(unknown)} unknown setting(s)'}; "
                             f"clients may set {', '.join(sorted(CLIENT_SETTINGS))}")
        check_kinds(value)
        if value.get("rerank") is not None and value["rerank"] not in CLIENT_RERANKERS:
            raise ValueError(f"rerank: clients may choose {', '.join(CLIENT_RERANKERS)}")
        extra = value.get("extra_paths")
        if extra is not None:
            if not isinstance(extra, list) or not set(map(str, extra)) <= EXTRA_PATHS:
                raise ValueError(f"extra_paths: a list of {', '.join(sorted(EXTRA_PATHS))}")
            value["extra_paths"] = list(dict.fromkeys(extra))
            if len(value["extra_paths"]) > LIMITS["extra_paths"]:
                raise ValueError(f"extra_paths: at most {LIMITS['extra_paths']}")
        langs = value.get("langs")
        if langs is not None and (not isinstance(langs, list) or len(langs) > LIMITS["langs"] or
                                  not all(isinstance(lang, str) and re.fullmatch(LANG, lang) and iso_language(lang)
                                          for lang in langs)):
            raise ValueError(f"langs: at most {LIMITS['langs']} ISO 639 codes (e.g. [\"sv\", \"en\"])")
        pivot = value.get("pivot")
        if pivot is not None and not (isinstance(pivot, str) and re.fullmatch(LANG, pivot) and iso_language(pivot)):
            raise ValueError("pivot: an ISO 639 code (e.g. \"en\")")
        for name in ("candidates", "k", "max_paths", "answer_tokens"):
            if isinstance(value.get(name), int) and value[name] > LIMITS[name]:
                raise ValueError(f"{name}: at most {LIMITS[name]} for a client")
        return value

    def config(self, llm: str | None, defaults: dict[str, Any] | None = None, seconds: float | None = None) -> SearchConfig:
        """The request's configuration; ``seconds`` (the request deadline) bounds the model seconds a strategy
        that declares a budget (CORAL's loop) may spend."""
        base = preset_config(self.preset, for_country({**(defaults or {}), **self.settings}, self.country)).model_dump()
        if llm:
            base["llm"] = llm
        base["answer_tokens"] = min(base["answer_tokens"], LIMITS["answer_tokens"])
        most = context_facts(base["context"]).max_passages  # each passage costs model calls
        if base["generate_k"] > most:
            raise ConfigError(f"generate_k: at most {most} with context {base['context']} (each passage costs "
                              f"model calls)")
        budget = STRATEGIES.facts(base["strategy"]).seconds_budget
        if seconds is not None and budget:
            section, field = budget.split(".")
            base[section] = {**base[section], field: min(base[section][field], 0.8 * seconds)}
        return make_config(base)


class AskBody(SearchBody):
    stream: bool = False
    # earlier turns: the question is rewritten to stand alone before retrieval (generate/conversation.py)
    history: list[Turn] = Field(default_factory=list, max_length=20)
