"""Process-wide translators named in a config, each behind the persistent translation cache."""
from __future__ import annotations

import threading
from functools import cache

from babelrag.errors import ConfigError
from babelrag.models.llm import build_llm
from babelrag.models.translate import CachedTranslator, LLMTranslator, MTTranslator, Translator
from babelrag.paths import cache_dir

_lock = threading.Lock()


def translator_for(spec: str, llm: str) -> Translator:
    """``llm`` (the config's LLM translates), ``mt:PATH`` (a seq2seq model from a local directory)."""
    with _lock:
        return _translator(spec, llm)


@cache
def _translator(spec: str, llm: str) -> Translator:
    if spec == "llm":
        inner: Translator = LLMTranslator(build_llm(llm))
    elif spec.startswith("mt:"):
        inner = MTTranslator(spec.removeprefix("mt:"))
    else:
        raise ConfigError(f"translator: unknown '{spec}' (llm, mt:PATH)")
    return CachedTranslator(inner, cache_dir() / "translations.sqlite")
