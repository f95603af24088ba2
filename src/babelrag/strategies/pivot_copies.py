"""The question as written, over the KB's pivot-language copies (docs/methods.md#pivot-copies).

``babelrag pivot-copies`` translates every passage not in the pivot language once, at ingest; this path
searches those copies, where every page is in one language and none gets a head start from sharing the
question's. Each copy is re-scored as the pivot-language passage it is, then stands for its original, so
the max-merge with the question's own path compares one scale and the evidence is the original text.
It calls no model at query time; a KB without copies is a configuration error, named.
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


@STRATEGIES.register("pivot_copies", facts=Facts(client_choosable=True),
                     about="the question over the passages' pivot-language copies made at ingest "
                           "(`babelrag pivot-copies`); as an extra path")
class PivotCopies:
    name = "pivot_copies"

    def __init__(self, models: Models) -> None:
        """Calls no model: the copies were translated at ingest."""

    def plan(self, question: Question, kb: KnowledgeBase, config: SearchConfig, trace: Trace) -> list[SearchRequest]:
        return [SearchRequest(question.text, kb.name, question.lang, path_filter(question, config, kb), self.name,
                              index="pivot_copies")]
