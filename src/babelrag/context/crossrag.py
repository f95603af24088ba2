"""CrossRAG ([RHB], SPEC §4.2): every passage not already in the pivot is translated into it; the
answer is still written in the question's language. The source language comes from passage
metadata, never guessed (cf. the public baseline that translated into the query language, §8.2)."""
from __future__ import annotations

from collections.abc import Sequence

from babelrag.config import SearchConfig
from babelrag.context.translation import translated_text
from babelrag.models.registry import translator_for
from babelrag.types import Context, ContextPassage, Hit, Question, Trace


class CrossRAG:
    name = "crossrag"

    def build(self, question: Question, evidence: Sequence[Hit], config: SearchConfig, trace: Trace) -> Context:
        translator = translator_for(config.translator, config.llm)
        passages = []
        for number, hit in enumerate(evidence, start=1):
            p = hit.passage
            text = translated_text(translator, p, config.pivot, trace) if p.lang != config.pivot else None
            passages.append(ContextPassage(number, p, text, config.pivot, translated=True, kind="translated")
                            if text is not None else ContextPassage(number, p, p.text, p.lang))
        return Context(self.name, tuple(passages))
