"""Passage translation for the context strategies: cached, counted, and never fatal.

A translation the model cannot produce (invalid output twice, a loop, an empty or copied answer)
leaves the passage in its own language, recorded as a failure, rather than losing the question.
"""
from __future__ import annotations

from babelrag.models.bundle import Models
from babelrag.models.llm import LLMError
from babelrag.models.translate import Translator, translate
from babelrag.registry import TRANSLATORS
from babelrag.types import Passage, Trace


def translated_text(translator: Translator, passage: Passage, target: str, trace: Trace) -> str | None:
    """The passage in ``target``, or None when no usable translation came back (recorded as a failure)."""
    try:
        return translate(translator, passage.text, passage.lang, target, trace)
    except LLMError as error:
        trace.fail("translate", f"passage {passage.id}: {error}", "passage kept in its own language")
        return None


def translation_slots(models: Models) -> int:
    """Passages translated at once: the LLM's slots when an LLM translates (a local MT model translates one
    at a time)."""
    return int(getattr(models.llm, "slots", 1)) if TRANSLATORS.facts(models.config.translator).calls_llm else 1
