"""The locale (cultural-language) classifier ([DELTA] App. J, prompt B; docs/methods.md#locale-classifier).

Given the English version of a question it names one primary place and the one cultural
language tied to it, whether the question is culture-specific, and a confidence. Decoding is
constrained to the schema. DELTA uses the whole cue; the DeLP analysis uses the label only.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from babelrag.models.llm import LLM
from babelrag.models.structured import complete_json
from babelrag.types import Trace

CulturalLanguage = Literal["en", "ar", "es", "de", "ja", "ko", "th", "zh", "fr", "it", "pt", "ru", "fi"]

PROMPT = """You classify the cultural locale of a question. Reply with JSON only, with these fields:
- country_or_region: the one primary place the question is about ("" if none);
- cultural_language: exactly one of en, ar, es, de, ja, ko, th, zh, fr, it, pt, ru, fi;
- is_culture_specific: true if answering needs knowledge tied to that place or culture;
- confidence: 0 to 1;
- rationale: a few words.
Rules: choose the local language of the primary place or culture. English wording is no reason for
"en": use "en" only for inherently English-speaking contexts (the US, the UK) or for global,
multi-country or placeless questions. A place whose language is in the list selects that language.
Examples: Hong Kong's return to China → zh; the capital of France → fr; the first US president → en;
comparing France and Germany → en."""


class CulturalCue(BaseModel):
    country_or_region: str = Field(max_length=60)
    cultural_language: CulturalLanguage
    is_culture_specific: bool
    confidence: float = Field(ge=0, le=1)
    rationale: str = Field("", max_length=80)


def classify_locale(llm: LLM, english_question: str, trace: Trace | None) -> CulturalCue:
    messages = [{"role": "system", "content": PROMPT}, {"role": "user", "content": english_question}]
    return complete_json(llm, messages, CulturalCue, role="classifier", trace=trace, max_tokens=100)
