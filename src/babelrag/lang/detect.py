"""Language identification restricted to a known set (py3langid), with the confidence kept."""
from __future__ import annotations

import copy
from collections.abc import Sequence
from functools import cache, lru_cache

from py3langid.langid import MODEL_FILE, LanguageIdentifier

from babelrag.errors import ConfigError
from babelrag.lang.languages import DEFAULT_DETECT


class LanguageDetector:
    """``detect(text) -> (lang, confidence)``; confidence is the normalised probability in [0, 1]."""

    def __init__(self, languages: Sequence[str] | None = None):
        # the model loads once (~0.5 s); restricting a shallow copy costs under a millisecond, because
        # set_languages replaces the copy's arrays instead of changing the shared ones
        self._identifier = copy.copy(_full_identifier())
        wanted = tuple(languages or DEFAULT_DETECT)
        unknown = sorted(set(wanted) - set(self._identifier.labels))
        if unknown:
            raise ConfigError(f"detect_languages: py3langid cannot identify {unknown}")
        self.languages = wanted
        self._identifier.set_languages(list(wanted))

    def detect(self, text: str) -> tuple[str, float]:
        lang, confidence = self._identifier.classify(text)
        return str(lang), float(confidence)


@cache
def _full_identifier() -> LanguageIdentifier:
    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


@lru_cache(maxsize=256)
def detector(languages: tuple[str, ...] | None = None) -> LanguageDetector:
    """Shared detectors, one per language set."""
    return LanguageDetector(languages)
