"""The question as written, in its own language (the [BLOG] base).

``lang_scope=all`` searches every language (MultiRAG); ``lang_scope=query`` only the question's
language (monoRAG, [RHB]).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from babelrag.config import SearchConfig
from babelrag.strategies.scope import path_filter
from babelrag.types import Question, SearchRequest, Trace

if TYPE_CHECKING:
    from babelrag.kb import KnowledgeBase


class AsWritten:
    name = "as_written"

    def plan(self, question: Question, kb: KnowledgeBase, config: SearchConfig, trace: Trace) -> list[SearchRequest]:
        return [SearchRequest(question.text, kb.name, question.lang, path_filter(question, config, kb), self.name)]
