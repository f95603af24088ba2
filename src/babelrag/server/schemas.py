"""Request bodies, validated before anything runs. Clients choose presets and a whitelist of settings;
nothing a client sends can name a file on the server (no reranker, model or translator paths)."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from babelrag.config import SearchConfig, make_config, preset_config

KB_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"
# fields a client may change; the model, translator, reranker paths and generator stay the server's
CLIENT_SETTINGS = {"mode", "fusion", "keyword_weight", "candidates", "rerank", "threshold", "k", "country_filter",
                   "langs", "merge", "strategy", "extra_paths", "lang_scope", "max_paths", "kb_paths", "context",
                   "generate_k", "answer_tokens", "dkm_combine", "dkm_parts", "qtt_min_score", "hyde_lang", "delta",
                   "pivot"}


class SearchBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kb: str = Field(pattern=KB_PATTERN)
    question: str = Field(min_length=1, max_length=2000)
    lang: str | None = Field(None, pattern=r"^[a-z]{2,3}$")
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
        return value

    def config(self, llm: str | None, defaults: dict[str, Any] | None = None) -> SearchConfig:
        base = preset_config(self.preset, {**(defaults or {}), **self.settings}).model_dump()
        if llm:
            base["llm"] = llm
        if base["answer_tokens"] > 512:
            base["answer_tokens"] = 512
        return make_config(base)


class AskBody(SearchBody):
    stream: bool = False
