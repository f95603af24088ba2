"""DKM-RAG ([MLRS], docs/methods.md#dkm-rag): passages not in the question's language are translated into it
(P_translated; native ones kept as they are), then an LLM rewrites each into a standalone passage
that brings in what it knows and drops what is redundant (P_refined). The generator reads
P_translated followed by P_refined (``combine=sets``, the paper) or each pair joined
(``combine=pairs``, the public code); ``dkm_parts`` keeps one set for the paper's ablations. Passages
are translated, then refined, as many at a time as the model has slots; a refinement that starts
looping is stopped there and dropped."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

from pydantic import BaseModel

from babelrag import deadline
from babelrag.concurrency import traced_in_order
from babelrag.context.translation import translated_text, translation_slots
from babelrag.lang.languages import language_name
from babelrag.models.bundle import Models
from babelrag.models.llm import LLMError
from babelrag.models.loops import LoopGuard, loops
from babelrag.models.structured import record
from babelrag.registry import CONTEXTS, Facts
from babelrag.search_config import SearchConfig
from babelrag.types import Context, ContextPassage, Hit, Question, Trace

REFINE_TOKENS = 200


def _refine_prompt(question: Question, text: str) -> list[dict[str, str]]:
    lang = language_name(question.lang or "en")
    return [{"role": "system", "content":
             f"Rewrite the passage, given the question, into one standalone passage in {lang}: bring in facts you "
             f"know about the question, merge them with the passage, drop redundant or unneeded sentences, add no "
             f"commentary, and keep it fluent and concise. Write only the passage."},
            {"role": "user", "content": f"Question: {question.text}\n\nPassage: {text}"}]


class DKMParams(BaseModel):
    """How the translated and refined passages combine, and the paper's ablations (docs/methods.md#dkm-rag)."""

    dkm_combine: Literal["sets", "pairs"] = "sets"
    dkm_parts: Literal["both", "translated", "refined"] = "both"
    refiner: str | None = None


# a translation and a refinement per passage
@CONTEXTS.register("dkm", params=DKMParams,
                   facts=Facts(llm_calls_per_passage=2, client_choosable=True, max_passages=3,
                               trace_stages=("refine",)),
                   about="translated passages beside their refined rewrites (DKM-RAG)")
class DKM:
    name = "dkm"

    def __init__(self, models: Models):
        self.models = models

    def build(self, question: Question, evidence: Sequence[Hit], config: SearchConfig, trace: Trace) -> Context:
        lang = question.lang or "en"
        translator = self.models.translator

        def translate_one(numbered: tuple[int, Hit], own: Trace) -> ContextPassage:
            number, p = numbered[0], numbered[1].passage
            text = translated_text(translator, p, lang, own) if p.lang != lang else None
            return ContextPassage(number, p, text, lang, translated=True, kind="translated") \
                if text is not None else ContextPassage(number, p, p.text, p.lang)

        translated = traced_in_order(translate_one, list(enumerate(evidence, start=1)), trace, translation_slots(self.models))
        if config.dkm_parts == "translated":  # ablation: w/o P_refined
            return Context(self.name, tuple(translated))
        llm = self.models.refiner  # the generator's model unless set apart

        def refine_one(cp: ContextPassage, own: Trace) -> ContextPassage | None:
            guard = LoopGuard(cp.text)
            try:
                completion = llm.stream(_refine_prompt(question, cp.text), guard, max_tokens=REFINE_TOKENS)
            except LLMError as error:
                own.fail("refine", f"passage {cp.passage.id}: {error}", "no refined passage")
                return None
            record(own, "rewriter", completion)
            if completion.stopped and not guard.fired:  # cut by the deadline, not finished
                deadline.check("the rest of a refinement")
            text = completion.text.strip()
            problem = "empty rewrite" if not text else "repeats itself (a decoding loop)" \
                if guard.fired or loops(text, cp.text) else "cut off before its end" if completion.stopped else None
            if problem:  # nothing refined is not the input passage again, nor a loop a passage
                own.fail("refine", f"passage {cp.passage.id}: {problem}", "no refined passage")
                return None
            return ContextPassage(0, cp.passage, text, lang, translated=cp.translated,
                                  kind="refined")

        with trace.step("refine", self.name, passages=len(translated)):
            kept = [r for r in traced_in_order(refine_one, translated, trace, int(getattr(llm, "slots", 1))) if r is not None]
        refined = [replace(r, number=len(translated) + i) for i, r in enumerate(kept, start=1)]
        if config.dkm_parts == "refined":  # ablation: w/o P_translated
            return Context(self.name, tuple(replace(r, number=i) for i, r in enumerate(refined, start=1)))
        if config.dkm_combine == "pairs":
            by_passage = {r.passage.id: r for r in refined}
            joined = tuple(replace(t, text=f"{t.text}\n{by_passage[t.passage.id].text}", kind="translated+refined")
                           if t.passage.id in by_passage else t for t in translated)
            return Context(self.name, joined)
        return Context(self.name, tuple(translated + refined))
