"""The passage filter every strategy's paths share: the question's country (plus global passages)
when the country filter is on, and the configured language scope."""
from __future__ import annotations

from babelrag.config import SearchConfig
from babelrag.types import PassageFilter, Question


def path_filter(question: Question, config: SearchConfig) -> PassageFilter:
    """``lang_scope``: all → the configured ``langs`` (empty: every language); query → the question's
    language only (monoRAG); pivot → the pivot language only (tRAG)."""
    langs = {"all": tuple(config.langs), "query": (question.lang,) if question.lang else (),
             "pivot": (config.pivot,)}[config.lang_scope]
    return PassageFilter(country=question.country if config.country_filter else None, langs=langs)
