"""QTT-RAG ([QTT], docs/methods.md#qtt-rag): passages not in the question's language are translated into it, an
LLM judge rates each translation against its original (semantic equivalence, grammatical
accuracy, naturalness: 0–5, one decimal, JSON), and the scores are attached as a tag line in Lq.
Nothing is rewritten, dropped or reordered — except in the hard-filter variant (``qtt_min_score``),
which drops translations whose mean score falls below it. The generator is told, in Lq, to trust
native passages first and translations by score. A passage whose translation failed is shown in its
own language under a tag that says so — never passed off as native."""
from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from babelrag.concurrency import traced_in_order
from babelrag.context.qtt_wording import qtt_wording
from babelrag.context.translation import translated_text, translation_slots
from babelrag.lang.languages import language_name
from babelrag.models.bundle import Models
from babelrag.models.llm import LLMError
from babelrag.models.structured import complete_json
from babelrag.registry import CONTEXTS, Facts
from babelrag.search_config import SearchConfig
from babelrag.types import Context, ContextPassage, Hit, Passage, Question, Trace


class Quality(BaseModel):
    semantic_equivalence: float = Field(ge=0, le=5)
    grammatical_accuracy: float = Field(ge=0, le=5)
    naturalness: float = Field(ge=0, le=5)


def _judge_prompt(original: Passage, translation: str, lang: str) -> list[dict[str, str]]:
    return [{"role": "system", "content":
             f"Rate a translation from {language_name(original.lang)} into {language_name(lang)} against its "
             f"original on three criteria, each from 0.0 to 5.0 with one decimal: semantic_equivalence, "
             f"grammatical_accuracy, naturalness. Reply with JSON only."},
            {"role": "user", "content": f"Original:\n{original.text}\n\nTranslation:\n{translation}"}]


class QTTParams(BaseModel):
    """The hard-filter variant: passages whose mean quality is below this are dropped."""

    qtt_min_score: float | None = Field(None, ge=0, le=5)


# a translation and a quality judgement per passage
@CONTEXTS.register("qtt", params=QTTParams,
                   facts=Facts(llm_calls_per_passage=2, client_choosable=True, max_passages=5),
                   about="translated passages tagged with their judged translation quality")
class QTT:
    name = "qtt"

    def __init__(self, models: Models):
        self.models = models

    def build(self, question: Question, evidence: Sequence[Hit], config: SearchConfig, trace: Trace) -> Context:
        lang = question.lang or "en"
        translator, llm = self.models.translator, self.models.llm
        words = qtt_wording(lang)
        def one(numbered: tuple[int, Hit], own: Trace) -> ContextPassage | None:
            number, p = numbered[0], numbered[1].passage
            if p.lang == lang:
                return ContextPassage(number, p, p.text, p.lang)
            text = translated_text(translator, p, lang, own)
            if text is None:  # the failure is in the trace; the generator is told the passage is untranslated
                if config.qtt_min_score is not None:
                    return None
                return ContextPassage(number, p, f"{p.text}\n[{words.quality}] {words.untranslated} {p.lang}",
                                      p.lang, kind="untranslated", tags={"quality": {}, "mean": None})
            try:
                q = complete_json(llm, _judge_prompt(p, text, lang), Quality, role="judge", trace=own, max_tokens=60)
                scores = {"semantic": round(q.semantic_equivalence, 1), "grammar": round(q.grammatical_accuracy, 1),
                          "fluency": round(q.naturalness, 1)}
                line = f"[{words.quality}] {words.semantic}: {scores['semantic']}, {words.grammar}: " \
                       f"{scores['grammar']}, {words.fluency}: {scores['fluency']}"
            except LLMError as error:  # docs/methods.md#qtt-rag: tagged unscored, and counted as the judge's failure
                own.fail("judge", f"passage {p.id}: {error}", "translation tagged unscored")
                scores, line = {}, f"[{words.quality}] {words.unscored}"
            mean = sum(scores.values()) / 3 if scores else None
            if config.qtt_min_score is not None and (mean is None or mean < config.qtt_min_score):
                return None
            return ContextPassage(number, p, f"{text}\n{line}", lang, translated=True, kind="translated",
                                  tags={"quality": scores, "mean": mean})

        built = traced_in_order(one, list(enumerate(evidence, start=1)), trace, translation_slots(self.models))
        passages = [cp for cp in built if cp is not None]
        return Context(self.name, tuple(passages), instruction=words.rules)
