"""English pivot: translate the question into the pivot language and search with that (docs/methods.md#trag).

``lang_scope=pivot`` is tRAG ([RHB], [CORAL]: the pivot corpus only); ``lang_scope=all`` is
[DELTA]'s "English Translation" baseline (the same multilingual datastore as the others).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from babelrag.models.bundle import Models
from babelrag.registry import STRATEGIES, Facts
from babelrag.search_config import SearchConfig
from babelrag.models.translate import TranslationFailed, translate
from babelrag.strategies.scope import path_filter
from babelrag.types import Question, SearchRequest, Trace

if TYPE_CHECKING:
    from babelrag.kb import KnowledgeBase


@STRATEGIES.register("pivot", facts=Facts(llm_calls_per_question=1, client_choosable=True, trace_stages=("translate",)),
                     about="the question translated into the pivot language")
class Pivot:
    name = "pivot"

    def __init__(self, models: Models):
        self.models = models

    def plan(self, question: Question, kb: KnowledgeBase, config: SearchConfig, trace: Trace) -> list[SearchRequest]:
        with trace.step("translate", self.name, src=question.lang, tgt=config.pivot) as record:
            try:
                text = translate(self.models.translator, question.text, question.lang or "",
                                 config.pivot, trace)
            except TranslationFailed as error:  # the search stage falls back to the question as written
                trace.fail("translate", str(error), "pivot path dropped")
                record["failed"] = str(error)
                return []
            record["text"] = text
        return [SearchRequest(text, kb.name, config.pivot, path_filter(question, config, kb), f"pivot:{config.pivot}",
                              origin="as_written" if text == question.text else "translated")]
