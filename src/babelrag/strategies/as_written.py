"""The question as written, in its own language (the [BLOG] base).

``lang_scope=all`` searches every language (MultiRAG); ``lang_scope=query`` only the question's
language (monoRAG, [RHB]).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from babelrag.models.bundle import Models
from babelrag.registry import STRATEGIES, Facts
from babelrag.search_config import SearchConfig
from babelrag.strategies.scope import path_filter
from babelrag.types import Question, SearchRequest, Trace

if TYPE_CHECKING:
    from babelrag.kb import KnowledgeBase


@STRATEGIES.register("as_written", facts=Facts(client_choosable=True), about="the question as written")
class AsWritten:
    name = "as_written"

    def __init__(self, models: Models) -> None:
        """Calls no model: the constructor every strategy shares."""

    def plan(self, question: Question, kb: KnowledgeBase, config: SearchConfig, trace: Trace) -> list[SearchRequest]:
        return [SearchRequest(question.text, kb.name, question.lang, path_filter(question, config, kb), self.name)]
