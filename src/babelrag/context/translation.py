"""Passage translation for the context strategies: cached, counted, and never fatal.

A translation the model cannot produce (invalid output twice, a loop, an empty or copied answer)
leaves the passage in its own language, recorded as a failure, rather than losing the question.
"""
from __future__ import annotations

from babelrag.config import SearchConfig
from babelrag.models.llm import LLMError, slots_of
from babelrag.models.translate import Translator, translate
from babelrag.types import Passage, Trace


def translated_text(translator: Translator, passage: Passage, target: str, trace: Trace) -> str | None:
    """The passage in ``target``, or None when no usable translation came back (recorded as a failure)."""
    try:
        return translate(translator, passage.text, passage.lang, target, trace)
    except LLMError as error:
        trace.fail("translate", f"passage {passage.id}: {error}", "passage kept in its own language")
        return None


def translation_slots(config: SearchConfig) -> int:
    """Passages translated at once: the LLM's slots (a local MT model translates one at a time)."""
    return slots_of(config.llm) if config.translator == "llm" else 1
