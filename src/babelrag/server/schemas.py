"""Request bodies, validated before anything runs. Clients choose presets and a whitelist of settings;
nothing a client sends can name a file on the server (no reranker, model or translator paths), and
every setting a client may change is bounded: the work one request can cause is capped."""
from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from babelrag.config import SearchConfig, for_country, make_config, preset_config
from babelrag.errors import ConfigError

KB_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"
LANG = r"^[a-z]{2,3}$"
# what one client request may ask for at most (the operator's own config is not bounded by these)
LIMITS = {"candidates": 200, "k": 100, "max_paths": 4, "extra_paths": 2, "langs": 12, "answer_tokens": 512}
GENERATE_K = {"multirag": 10, "none": 10, "crossrag": 5, "dkm": 3, "qtt": 5}  # each passage costs LLM calls
EXTRA_PATHS = {"as_written", "pivot", "kb_languages", "hyde", "delta"}
# fields a client may change; the model, translator, reranker paths and generator stay the server's
CLIENT_SETTINGS = {"mode", "fusion", "keyword_weight", "candidates", "rerank", "threshold", "k", "country_filter",
                   "langs", "merge", "strategy", "extra_paths", "lang_scope", "max_paths", "kb_paths", "context",
                   "generate_k", "answer_tokens", "dkm_combine", "dkm_parts", "qtt_min_score", "hyde_lang", "delta",
                   "pivot"}


class SearchBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kb: str = Field(pattern=KB_PATTERN)
    question: str = Field(min_length=1, max_length=2000)
    lang: str | None = Field(None, pattern=LANG)
    country: str | None = Field(None, min_length=1, max_length=16, pattern=r"^[A-Za-z0-9_-]+$")
    preset: str = Field("default", min_length=1, max_length=64, pattern=r"^[A-Za-z0-9+._-]+$")
    settings: dict[str, Any] = Field(default_factory=dict)

    @field_validator("settings")
    @classmethod
    def _whitelisted(cls, value: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(value) - CLIENT_SETTINGS)
        if unknown:
            raise ValueError(f"these settings are not open to clients: {', '.join(unknown)}")
        if value.get("rerank") not in (None, "none", "learned", "learned:default", "dense-resort", "dense"):
            raise ValueError("rerank: clients may choose none, learned, learned:default or dense-resort")
        extra = value.get("extra_paths")
        if extra is not None:
            if not isinstance(extra, list) or not set(map(str, extra)) <= EXTRA_PATHS:
                raise ValueError(f"extra_paths: a list of {', '.join(sorted(EXTRA_PATHS))}")
            value["extra_paths"] = list(dict.fromkeys(extra))
            if len(value["extra_paths"]) > LIMITS["extra_paths"]:
                raise ValueError(f"extra_paths: at most {LIMITS['extra_paths']}")
        langs = value.get("langs")
        if langs is not None and (not isinstance(langs, list) or len(langs) > LIMITS["langs"] or
                                  not all(isinstance(lang, str) and re.fullmatch(LANG, lang) for lang in langs)):
            raise ValueError(f"langs: at most {LIMITS['langs']} ISO 639 codes (e.g. [\"sv\", \"en\"])")
        pivot = value.get("pivot")
        if pivot is not None and not (isinstance(pivot, str) and re.fullmatch(LANG, pivot)):
            raise ValueError("pivot: an ISO 639 code (e.g. \"en\")")
        for name in ("candidates", "k", "max_paths", "answer_tokens"):
            if isinstance(value.get(name), int) and value[name] > LIMITS[name]:
                raise ValueError(f"{name}: at most {LIMITS[name]} for a client")
        return value

    def config(self, llm: str | None, defaults: dict[str, Any] | None = None, seconds: float | None = None) -> SearchConfig:
        """The request's configuration; ``seconds`` (the request deadline) bounds CORAL's model budget."""
        base = preset_config(self.preset, for_country({**(defaults or {}), **self.settings}, self.country)).model_dump()
        if llm:
            base["llm"] = llm
        base["answer_tokens"] = min(base["answer_tokens"], LIMITS["answer_tokens"])
        most = GENERATE_K.get(base["context"], 5)
        if base["generate_k"] > most:
            raise ConfigError(f"generate_k: at most {most} with context {base['context']} (each passage costs "
                              f"model calls)")
        if seconds is not None:
            base["coral"] = {**base["coral"], "max_seconds": min(base["coral"]["max_seconds"], 0.8 * seconds)}
        return make_config(base)


class AskBody(SearchBody):
    stream: bool = False
