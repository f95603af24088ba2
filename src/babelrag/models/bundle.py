"""The models one configuration's methods use, built in one place and handed to them.

Query and context strategies receive a ``Models`` and never build an LLM or translator themselves, so a
test (or an application) hands in its own objects the same way the pipeline hands in the real ones.
Each model is built on first use: a strategy that never calls one never loads it.
"""
from __future__ import annotations

from functools import cached_property

from babelrag.models.llm import build_llm
from babelrag.models.llm_types import LLM
from babelrag.models.registry import translator_for
from babelrag.models.translate import Translator
from babelrag.search_config import SearchConfig


class Models:
    """``llm`` plans and classifies; ``translator`` translates queries and passages; ``generator`` answers;
    ``refiner`` rewrites passages (DKM-RAG, default: the generator); ``rewriter`` makes a conversation's
    follow-up standalone (default: ``llm``). Any of them may be given ready-made."""

    def __init__(self, config: SearchConfig, *, llm: LLM | None = None, translator: Translator | None = None,
                 generator: LLM | None = None, refiner: LLM | None = None, rewriter: LLM | None = None):
        self.config = config
        for name, given in (("llm", llm), ("translator", translator), ("generator", generator), ("refiner", refiner),
                            ("rewriter", rewriter)):
            if given is not None:
                self.__dict__[name] = given  # what cached_property would have stored

    @cached_property
    def llm(self) -> LLM:
        return build_llm(self.config.llm)

    @cached_property
    def translator(self) -> Translator:
        return translator_for(self.config.translator, self.config.llm)

    @cached_property
    def generator(self) -> LLM:
        return build_llm(self.config.generator or self.config.llm)

    @cached_property
    def rewriter(self) -> LLM:
        return build_llm(self.config.conversation_llm or self.config.llm)

    @cached_property
    def refiner(self) -> LLM:
        if self.config.refiner is None:
            return self.generator
        return build_llm(self.config.refiner)
