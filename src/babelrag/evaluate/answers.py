"""Answer metrics (docs/methods.md#answer-metrics): character 3-gram recall (``lang/ngrams.py``), flexible exact match,
answer language. Normalisation lowercases and turns punctuation into spaces; no article removal."""
from __future__ import annotations

from collections.abc import Sequence

from babelrag.lang.detect import detector
from babelrag.lang.ngrams import ASCII_PUNCT, char3gram_recall, char3grams, unicode_punct_to_space

__all__ = ["answer_language_correct", "char3gram_recall", "char3grams", "flexible_exact_match"]


def _flexible_normalise(text: str) -> str:
    return " ".join(unicode_punct_to_space(text.lower().translate(ASCII_PUNCT)).split())


def flexible_exact_match(prediction: str, references: Sequence[str]) -> bool:
    """Any normalised gold answer is a substring of the normalised prediction (no article removal)."""
    predicted = _flexible_normalise(prediction)
    return any(_flexible_normalise(r) and _flexible_normalise(r) in predicted for r in references)


def answer_language_correct(answer: str, expected: str, languages: Sequence[str]) -> bool | None:
    """Is the answer in ``expected``? ``None`` when too short to classify (< 3 letters), counted apart."""
    if sum(c.isalpha() for c in answer) < 3:
        return None
    lang, _ = detector(tuple(sorted(set(languages) | {expected}))).detect(answer)
    return lang == expected
