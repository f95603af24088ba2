"""Passage translation for the context strategies: cached, counted, and never fatal.

A translation the model cannot produce (invalid output twice) leaves the passage in its own
language, marked so, rather than losing the question.
"""
from __future__ import annotations

from babelrag.models.llm import LLMError
from babelrag.models.translate import Translator, translate
from babelrag.types import Passage, Trace


def translated_text(translator: Translator, passage: Passage, target: str, trace: Trace) -> str | None:
    try:
        return translate(translator, passage.text, passage.lang, target, trace)
    except LLMError as error:
        with trace.step("translate", "passage", passage=passage.id, target=target) as step:
            step["error"] = str(error)
        return None
