"""DKM-RAG ([MLRS], SPEC §4.3): passages not in the question's language are translated into it
(P_translated; native ones kept as they are), then an LLM rewrites each into a standalone passage
that brings in what it knows and drops what is redundant (P_refined). The generator reads
P_translated followed by P_refined (``combine=sets``, the paper) or each pair joined
(``combine=pairs``, the public code); ``dkm_parts`` keeps one set for the paper's ablations."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from babelrag.config import SearchConfig
from babelrag.context.translation import translated_text
from babelrag.lang.languages import language_name
from babelrag.models.llm import LLMError, build_llm
from babelrag.models.registry import translator_for
from babelrag.models.structured import record
from babelrag.types import Context, ContextPassage, Hit, Question, Trace

REFINE_TOKENS = 200


def _refine_prompt(question: Question, text: str) -> list[dict[str, str]]:
    lang = language_name(question.lang or "en")
    return [{"role": "system", "content":
             f"Rewrite the passage, given the question, into one standalone passage in {lang}: bring in facts you "
             f"know about the question, merge them with the passage, drop redundant or unneeded sentences, add no "
             f"commentary, and keep it fluent and concise. Write only the passage."},
            {"role": "user", "content": f"Question: {question.text}\n\nPassage: {text}"}]


class DKM:
    name = "dkm"

    def build(self, question: Question, evidence: Sequence[Hit], config: SearchConfig, trace: Trace) -> Context:
        lang = question.lang or "en"
        translator = translator_for(config.translator, config.llm)
        translated: list[ContextPassage] = []
        for number, hit in enumerate(evidence, start=1):
            p = hit.passage
            text = translated_text(translator, p, lang, trace) if p.lang != lang else None
            translated.append(ContextPassage(number, p, text, lang, translated=True, kind="translated")
                              if text is not None else ContextPassage(number, p, p.text, p.lang))
        if config.dkm_parts == "translated":  # ablation: w/o P_refined
            return Context(self.name, tuple(translated))
        llm = build_llm(config.refiner or config.generator or config.llm)  # the generator's model unless set apart
        refined: list[ContextPassage] = []
        with trace.step("refine", self.name, passages=len(translated)):
            for cp in translated:
                try:
                    completion = llm.complete(_refine_prompt(question, cp.text), max_tokens=REFINE_TOKENS)
                except LLMError as error:
                    trace.fail("refine", f"passage {cp.passage.id}: {error}", "no refined passage")
                    continue
                record(trace, "rewriter", completion)
                if not completion.text.strip():  # nothing refined is not the input passage again
                    trace.fail("refine", f"passage {cp.passage.id}: empty rewrite", "no refined passage")
                    continue
                refined.append(ContextPassage(len(translated) + len(refined) + 1, cp.passage, completion.text.strip(),
                                              lang, translated=cp.translated, kind="refined"))
        if config.dkm_parts == "refined":  # ablation: w/o P_translated
            return Context(self.name, tuple(replace(r, number=i) for i, r in enumerate(refined, start=1)))
        if config.dkm_combine == "pairs":
            by_passage = {r.passage.id: r for r in refined}
            joined = tuple(replace(t, text=f"{t.text}\n{by_passage[t.passage.id].text}", kind="translated+refined")
                           if t.passage.id in by_passage else t for t in translated)
            return Context(self.name, joined)
        return Context(self.name, tuple(translated + refined))
