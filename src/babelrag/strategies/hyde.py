"""HyDE (Gao et al. 2023): an LLM writes a plausible answer passage, which is searched (docs/methods.md#hyde).

Alone (``strategy=hyde``) it replaces the question; as ``extra_paths=[hyde]`` it joins another
strategy's paths. The passage is written in the question's language by default, and its
candidates are reranked against the original question, so max-merge compares like with like.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel

from babelrag.lang.languages import language_name
from babelrag.models.bundle import Models
from babelrag.models.llm import LLMError
from babelrag.models.structured import record
from babelrag.registry import STRATEGIES, Facts
from babelrag.search_config import SearchConfig
from babelrag.strategies.scope import path_filter
from babelrag.types import Question, SearchRequest, Trace

if TYPE_CHECKING:
    from babelrag.kb import KnowledgeBase

MAX_TOKENS = 90


class HydeParams(BaseModel):
    """The passage's language: the question's, or the pivot."""

    hyde_lang: Literal["query", "pivot"] = "query"


@STRATEGIES.register("hyde", params=HydeParams,
                     facts=Facts(llm_calls_per_question=1, client_choosable=True, trace_stages=("hyde",)),
                     about="a passage an LLM writes to answer the question")
class HyDE:
    name = "hyde"

    def __init__(self, models: Models):
        self.models = models

    def plan(self, question: Question, kb: KnowledgeBase, config: SearchConfig, trace: Trace) -> list[SearchRequest]:
        lang = question.lang if config.hyde_lang == "query" and question.lang else config.pivot
        messages = [{"role": "system", "content":
                     f"Write one short encyclopedia-style paragraph in {language_name(lang)} that answers the "
                     f"user's question with plausible facts. Write only the paragraph: no preamble, no caveats."},
                    {"role": "user", "content": question.text}]
        with trace.step("hyde", self.name, lang=lang) as step:
            try:
                completion = self.models.llm.complete(messages, max_tokens=MAX_TOKENS)
            except LLMError as error:
                trace.fail("hyde", str(error), "hyde path dropped")
                return []
            record(trace, "hyde", completion)
            step["passage"] = completion.text
        if not completion.text.strip():  # an empty passage searches nothing; it is not the question either
            trace.fail("hyde", "empty passage", "hyde path dropped")
            return []
        return [SearchRequest(completion.text.strip(), kb.name, lang, path_filter(question, config, kb), self.name,
                              rerank_text=question.text, origin="generated")]
