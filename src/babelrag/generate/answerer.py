"""Question → answer: search (any query strategy) → top ``generate_k`` → context strategy → generator.

``context=none`` is no-RAG: nothing is retrieved and the generator gets the no-evidence prompt.
With earlier turns (``history``) the question is first made standalone (``conversation.py``), and the
rest of the flow sees only that question; the generator answers it in the user's language.
The search trace continues through the context and generation stages, so one trace shows the
paths, the translations of the evidence and the answer with its costs.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from babelrag.config import SearchConfig
from babelrag.context import build_context
from babelrag.generate.conversation import Condenser, LLMCondenser, Turn
from babelrag.generate.generator import generate
from babelrag.kb import KnowledgeBase
from babelrag.lang.detect import detector
from babelrag.models.bundle import Models
from babelrag.retrieve.cache import RetrievalCache
from babelrag.retrieve.pipeline import Searcher
from babelrag.types import Answer, Context, Question, Trace


class Answerer:
    def __init__(self, kb: KnowledgeBase, config: SearchConfig, cache: RetrievalCache | None = None,
                 condenser: Condenser | None = None, models: Models | None = None):
        """``condenser``: what makes a follow-up standalone (default: the config's ``conversation_llm``, else
        its ``llm``, rewrites it); ``models``: what the strategies call (default: the config's)."""
        self.kb, self.config = kb, config
        self.models = models or Models(config)
        self.searcher = Searcher(kb, config, cache, self.models) if config.context != "none" else None
        self.context = build_context(config.context, self.models) if config.context != "none" else None
        self._detect = detector(tuple(kb.manifest.detect_languages))
        self._condenser = condenser

    def condenser(self) -> Condenser:
        """Built on first use: a single question never loads the rewriting model."""
        if self._condenser is None:
            self._condenser = LLMCondenser(self.models.rewriter, self._detect)
        return self._condenser

    def ask(self, question: Question | str, on_text: Callable[[str], None] | None = None,
            history: Sequence[Turn] = ()) -> Answer:
        """``on_text`` receives the answer's text as it is generated; ``history``: the earlier turns of a
        conversation, ``(role, text)`` pairs (``conversation.turns_of`` reads chat messages)."""
        if isinstance(question, str):
            question = Question(question)
        trace = Trace()
        if history:
            question = self.condenser().standalone(question, history, trace)
        if self.searcher is None or self.context is None:
            if question.lang is None:
                with trace.step("detect", "question") as record:
                    lang, confidence = self._detect.detect(question.text)
                    question = replace(question, lang=lang)
                    record.update(lang=lang, confidence=confidence)
            search, context = None, Context("none")
        else:
            search = self.searcher.search(question)
            trace.extend(search.trace)  # the conversation step first, then the search's own
            question, search = search.question, replace(search, trace=trace)
            with trace.step("context", self.context.name, k=self.config.generate_k) as step:
                context = self.context.build(question, search.evidence.hits[:self.config.generate_k], self.config,
                                             trace)
                step.update(passages=[{"number": cp.number, "id": cp.passage.id, "lang": cp.lang,
                                       "translated": cp.translated, "kind": cp.kind} for cp in context.passages])
        text, citations, how = generate(question, context, self.config, self.models.generator, trace, on_text,
                                        asked=generator_query(question, trace, self.config))
        return Answer(question, text, citations, how, context, search, trace)


def generator_query(question: Question, trace: Trace, config: SearchConfig) -> str:
    """What the generator is asked: DELTA's fused query when a DELTA path built one and
    ``delta.generator_query`` is ``fused`` (docs/methods.md#delta-generator-query), else the question as written."""
    if config.delta.generator_query == "fused":
        fused = [s.data["fused"] for s in trace.steps if s.stage == "delta" and s.data.get("fused")]
        if fused:
            return fused[-1]
    return question.text
