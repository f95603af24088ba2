"""Process-wide translators named in a config, each behind the persistent translation cache, and LLM
objects of your own registered under a name a config can use (``llm: my-model``)."""
from __future__ import annotations

import threading
from functools import cache

from babelrag.errors import ConfigError
from babelrag.models import llm as llms
from babelrag.models.llm import LLM, build_llm
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


def register_llm(name: str, llm: LLM | None) -> None:
    """Make ``llm`` what ``llm: NAME`` (and translation with it) uses in this process; ``None`` removes
    it. Not wrapped in the completion cache: your object decides whether it is deterministic."""
    with _lock, llms._lock:
        if llm is None:
            llms._registered.pop(name, None)
        else:
            llms._registered[name] = llm
        _translator.cache_clear()
