"""Process-wide translators named in a config, each behind the persistent translation cache, and LLM
objects of your own registered under a name a config can use (``llm: my-model``)."""
from __future__ import annotations

import threading
from functools import cache

from babelrag.models import llm as llms
from babelrag.models.llm import LLM, build_llm
from babelrag.models.translate import CachedTranslator, LLMTranslator, MTTranslator, Translator
from babelrag.paths import cache_dir
from babelrag.registry import TRANSLATORS, Facts

_lock = threading.Lock()


@TRANSLATORS.register("llm", facts=Facts(llm_calls_per_passage=1), about="the config's LLM translates")
def _llm_translator(llm: str) -> Translator:
    return LLMTranslator(build_llm(llm))


@TRANSLATORS.register("mt", argument="PATH", about="mt:PATH, a seq2seq model from a local directory")
def _mt_translator(path: str, llm: str) -> Translator:
    return MTTranslator(path)


def translator_for(spec: str, llm: str) -> Translator:
    """``llm`` (the config's LLM translates), ``mt:PATH`` (a seq2seq model from a local directory)."""
    with _lock:
        return _translator(spec, llm)


@cache
def _translator(spec: str, llm: str) -> Translator:
    return CachedTranslator(TRANSLATORS.make(spec, llm), cache_dir() / "translations.sqlite")


def register_llm(name: str, llm: LLM | None) -> None:
    """Make ``llm`` what ``llm: NAME`` (and translation with it) uses in this process; ``None`` removes
    it. Not wrapped in the completion cache: your object decides whether it is deterministic."""
    with _lock:
        llms.register_llm(name, llm)
        _translator.cache_clear()
