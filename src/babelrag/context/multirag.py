"""MultiRAG / monoRAG ([RHB], [BERGEN]): the passages as retrieved, in whatever language they are."""
from __future__ import annotations

from collections.abc import Sequence

from babelrag.models.bundle import Models
from babelrag.registry import CONTEXTS, Facts
from babelrag.search_config import SearchConfig
from babelrag.types import Context, ContextPassage, Hit, Question, Trace


@CONTEXTS.register("multirag", facts=Facts(client_choosable=True, max_passages=10),
                   about="the passages as retrieved")
class MultiRAG:
    name = "multirag"

    def __init__(self, models: Models) -> None:
        """Calls no model: the constructor every context strategy shares."""

    def build(self, question: Question, evidence: Sequence[Hit], config: SearchConfig, trace: Trace) -> Context:
        return Context(self.name, tuple(ContextPassage(i, h.passage, h.passage.text, h.passage.lang)
                                        for i, h in enumerate(evidence, start=1)))
