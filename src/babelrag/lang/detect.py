"""Language identification restricted to a known set (py3langid), with the confidence kept."""
from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from py3langid.langid import MODEL_FILE, LanguageIdentifier

from babelrag.errors import ConfigError
from babelrag.lang.languages import DEFAULT_DETECT


class LanguageDetector:
    """``detect(text) -> (lang, confidence)``; confidence is the normalised probability in [0, 1]."""

    def __init__(self, languages: Sequence[str] | None = None):
        self._identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        wanted = tuple(languages or DEFAULT_DETECT)
        unknown = sorted(set(wanted) - set(self._identifier.labels))
        if unknown:
            raise ConfigError(f"detect_languages: py3langid cannot identify {unknown}")
        self.languages = wanted
        self._identifier.set_languages(list(wanted))

    def detect(self, text: str) -> tuple[str, float]:
        lang, confidence = self._identifier.classify(text)
        return str(lang), float(confidence)


@lru_cache(maxsize=8)
def detector(languages: tuple[str, ...] | None = None) -> LanguageDetector:
    """Shared detectors: loading the model costs ~0.1 s, so keep one per language set."""
    return LanguageDetector(languages)
