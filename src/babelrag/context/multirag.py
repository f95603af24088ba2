"""MultiRAG / monoRAG ([RHB], [BERGEN]): the passages as retrieved, in whatever language they are."""
from __future__ import annotations

from collections.abc import Sequence

from babelrag.config import SearchConfig
from babelrag.types import Context, ContextPassage, Hit, Question, Trace


class MultiRAG:
    name = "multirag"

    def build(self, question: Question, evidence: Sequence[Hit], config: SearchConfig, trace: Trace) -> Context:
        return Context(self.name, tuple(ContextPassage(i, h.passage, h.passage.text, h.passage.lang)
                                        for i, h in enumerate(evidence, start=1)))
