"""CrossRAG ([RHB], docs/methods.md#crossrag): every passage not already in the pivot is translated into it; the
answer is still written in the question's language. The source language comes from passage
metadata, never guessed (cf. the public baseline that translated into the query language, §8.2).
Passages are translated as many at a time as the model has slots."""
from __future__ import annotations

from collections.abc import Sequence

from babelrag.concurrency import traced_in_order
from babelrag.context.translation import translated_text, translation_slots
from babelrag.models.bundle import Models
from babelrag.registry import CONTEXTS, Facts
from babelrag.search_config import SearchConfig
from babelrag.types import Context, ContextPassage, Hit, Question, Trace


@CONTEXTS.register("crossrag", facts=Facts(llm_calls_per_passage=1, client_choosable=True, max_passages=5),
                   about="every passage translated into the pivot")
class CrossRAG:
    name = "crossrag"

    def __init__(self, models: Models):
        self.models = models

    def build(self, question: Question, evidence: Sequence[Hit], config: SearchConfig, trace: Trace) -> Context:
        translator = self.models.translator

        def one(numbered: tuple[int, Hit], own: Trace) -> ContextPassage:
            number, p = numbered[0], numbered[1].passage
            text = translated_text(translator, p, config.pivot, own) if p.lang != config.pivot else None
            return ContextPassage(number, p, text, config.pivot, translated=True, kind="translated") \
                if text is not None else ContextPassage(number, p, p.text, p.lang)

        passages = traced_in_order(one, list(enumerate(evidence, start=1)), trace, translation_slots(self.models))
        return Context(self.name, tuple(passages))
