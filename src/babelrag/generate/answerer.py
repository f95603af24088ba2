"""Question → answer: search (any query strategy) → top ``generate_k`` → context strategy → generator.

``context=none`` is no-RAG: nothing is retrieved and the generator gets the no-evidence prompt.
The search trace continues through the context and generation stages, so one trace shows the
paths, the translations of the evidence and the answer with its costs.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from babelrag.config import SearchConfig
from babelrag.context import build_context
from babelrag.generate.generator import generate
from babelrag.kb import KnowledgeBase
from babelrag.lang.detect import detector
from babelrag.retrieve.cache import RetrievalCache
from babelrag.retrieve.pipeline import Searcher
from babelrag.types import Answer, Context, Question, Trace


class Answerer:
    def __init__(self, kb: KnowledgeBase, config: SearchConfig, cache: RetrievalCache | None = None):
        self.kb, self.config = kb, config
        self.searcher = Searcher(kb, config, cache) if config.context != "none" else None
        self.context = build_context(config.context) if config.context != "none" else None
        self._detect = detector(tuple(kb.manifest["detect_languages"]))

    def ask(self, question: Question | str, on_text: Callable[[str], None] | None = None) -> Answer:
        """``on_text`` receives the answer's text as it is generated."""
        if isinstance(question, str):
            question = Question(question)
        if self.searcher is None or self.context is None:
            trace = Trace()
            if question.lang is None:
                with trace.step("detect", "question") as record:
                    lang, confidence = self._detect.detect(question.text)
                    question = replace(question, lang=lang)
                    record.update(lang=lang, confidence=confidence)
            search, context = None, Context("none")
        else:
            search = self.searcher.search(question)
            question, trace = search.question, search.trace
            with trace.step("context", self.context.name, k=self.config.generate_k) as step:
                context = self.context.build(question, search.evidence.hits[:self.config.generate_k], self.config,
                                             trace)
                step.update(passages=[{"number": cp.number, "id": cp.passage.id, "lang": cp.lang,
                                       "translated": cp.translated, "kind": cp.kind} for cp in context.passages])
        text, citations, how = generate(question, context, self.config, trace, on_text,
                                        asked=generator_query(question, trace, self.config))
        return Answer(question, text, citations, how, context, search, trace)


def generator_query(question: Question, trace: Trace, config: SearchConfig) -> str:
    """What the generator is asked: DELTA's fused query when a DELTA path built one and
    ``delta.generator_query`` is ``fused`` (SPEC §3.8), else the question as written."""
    if config.delta.generator_query == "fused":
        fused = [s.data["fused"] for s in trace.steps if s.stage == "delta" and s.data.get("fused")]
        if fused:
            return fused[-1]
    return question.text
