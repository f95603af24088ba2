"""QTT-RAG ([QTT], SPEC §4.4): passages not in the question's language are translated into it, an
LLM judge rates each translation against its original (semantic equivalence, grammatical
accuracy, naturalness: 0–5, one decimal, JSON), and the scores are attached as a tag line in Lq.
Nothing is rewritten, dropped or reordered — except in the hard-filter variant (``qtt_min_score``),
which drops translations whose mean score falls below it. The generator is told, in Lq, to trust
native passages first and translations by score."""
from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from babelrag.config import SearchConfig
from babelrag.context.translation import translated_text
from babelrag.lang.languages import language_name
from babelrag.models.llm import LLMError, build_llm
from babelrag.models.registry import translator_for
from babelrag.models.structured import complete_json
from babelrag.types import Context, ContextPassage, Hit, Passage, Question, Trace

# QTT (SPEC §4.4): the trust order, and the labels of the quality tag, in Lq.
QTT_RULES: dict[str, str] = {
    "en": "Some documents were written in English; others were translated and carry quality scores for semantic "
          "equivalence, grammar and fluency (0–5). Rely first and most on the original documents, use translated "
          "ones as support in descending order of their scores, and treat uncertain information with caution.",
    "de": "Einige Dokumente wurden auf Deutsch verfasst, andere wurden übersetzt und tragen Qualitätswerte für "
          "Bedeutungstreue, Grammatik und Flüssigkeit (0–5). Stütze dich zuerst und vor allem auf die Originale, "
          "nutze Übersetzungen ergänzend in absteigender Reihenfolge ihrer Werte und behandle unsichere Angaben "
          "mit Vorsicht.",
    "es": "Algunos documentos se escribieron en español; otros se tradujeron y llevan puntuaciones de calidad de "
          "equivalencia semántica, gramática y fluidez (0–5). Apóyate primero y sobre todo en los originales, usa "
          "las traducciones como apoyo en orden descendente de puntuación y trata con cautela la información dudosa.",
    "sv": "Vissa dokument är skrivna på svenska; andra är översatta och har kvalitetspoäng för betydelse, grammatik "
          "och flyt (0–5). Lita först och främst på originalen, använd översättningarna som stöd i fallande "
          "poängordning och var försiktig med osäker information.",
    "ru": "Часть документов написана на русском языке; другие переведены и имеют оценки качества: смысловая "
          "точность, грамматика и беглость (0–5). Опирайся прежде всего на оригиналы, используй переводы как "
          "дополнение в порядке убывания оценок и осторожно относись к сомнительным сведениям.",
    "zh": "部分文档原本以中文撰写；其他文档为译文，并附有语义等价、语法和流畅度的质量评分（0–5）。请首先并主要依据原文文档，"
          "按评分从高到低将译文作为补充，并谨慎对待不确定的信息。",
}
QTT_LABELS: dict[str, tuple[str, str, str, str]] = {  # quality, semantic, grammar, fluency
    "en": ("quality", "semantic", "grammar", "fluency"),
    "de": ("Qualität", "Bedeutung", "Grammatik", "Flüssigkeit"),
    "es": ("calidad", "semántica", "gramática", "fluidez"),
    "sv": ("kvalitet", "betydelse", "grammatik", "flyt"),
    "ru": ("качество", "смысл", "грамматика", "беглость"),
    "zh": ("质量", "语义", "语法", "流畅度"),
}


def qtt_rules(lang: str) -> str:
    return QTT_RULES.get(lang) or QTT_RULES["en"].replace("written in English", f"written in {language_name(lang)}")


def qtt_labels(lang: str) -> tuple[str, str, str, str]:
    return QTT_LABELS.get(lang, QTT_LABELS["en"])


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


class QTT:
    name = "qtt"

    def build(self, question: Question, evidence: Sequence[Hit], config: SearchConfig, trace: Trace) -> Context:
        lang = question.lang or "en"
        translator = translator_for(config.translator, config.llm)
        llm = build_llm(config.llm)
        tag, semantic, grammar, fluency = qtt_labels(lang)
        passages = []
        for number, hit in enumerate(evidence, start=1):
            p = hit.passage
            text = translated_text(translator, p, lang, trace) if p.lang != lang else None
            if text is None:
                passages.append(ContextPassage(number, p, p.text, p.lang))
                continue
            try:
                q = complete_json(llm, _judge_prompt(p, text, lang), Quality, role="judge", trace=trace, max_tokens=60)
                scores = {"semantic": round(q.semantic_equivalence, 1), "grammar": round(q.grammatical_accuracy, 1),
                          "fluency": round(q.naturalness, 1)}
                line = f"[{tag}] {semantic}: {scores['semantic']}, {grammar}: {scores['grammar']}, " \
                       f"{fluency}: {scores['fluency']}"
            except LLMError as error:  # SPEC §4.4: tagged unscored, and counted as the judge's failure
                trace.fail("judge", f"passage {p.id}: {error}", "translation tagged unscored")
                scores, line = {}, f"[{tag}] unscored"
            mean = sum(scores.values()) / 3 if scores else None
            if config.qtt_min_score is not None and (mean is None or mean < config.qtt_min_score):
                continue
            passages.append(ContextPassage(number, p, f"{text}\n{line}", lang, translated=True, kind="translated",
                                           tags={"quality": scores, "mean": mean}))
        return Context(self.name, tuple(passages), instruction=qtt_rules(lang))
