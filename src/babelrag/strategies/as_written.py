"""The question as written, in its own language, over the configured scope (the [BLOG] base).

With ``langs`` empty it searches every language (MultiRAG); with ``langs=[<Lq>]`` it is monoRAG.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from babelrag.config import SearchConfig
from babelrag.types import PassageFilter, Question, SearchRequest, Trace

if TYPE_CHECKING:
    from babelrag.kb import KnowledgeBase


class AsWritten:
    name = "as_written"

    def plan(self, question: Question, kb: KnowledgeBase, config: SearchConfig, trace: Trace) -> list[SearchRequest]:
        country = question.country if config.country_filter else None
        flt = PassageFilter(country=country, langs=tuple(config.langs))
        return [SearchRequest(question.text, kb.name, question.lang, flt, self.name)]
