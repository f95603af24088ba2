"""Word segmenters for the scripts written without spaces, loaded on first use.

Each returns content words only (particles, endings and punctuation dropped): BM25 over
function morphemes adds noise, and the engine's IDF cannot fully cancel it on short queries.
"""
from __future__ import annotations

import os
import threading
from functools import cache
from pathlib import Path

import regex

_HAS_WORD_CHAR = regex.compile(r"[\p{L}\p{N}]")
_lock = threading.Lock()


def _content(tokens: list[str]) -> list[str]:
    return [t for t in (t.strip() for t in tokens) if t and _HAS_WORD_CHAR.search(t)]


@cache
def _jieba():  # noqa: ANN202 - third-party object
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)
    tokenizer = jieba.Tokenizer()
    tokenizer.tmp_dir = str(_cache_dir("jieba"))
    tokenizer.initialize()
    return tokenizer


def chinese(text: str) -> list[str]:
    """jieba search mode: 北京大学 → 北京, 大学, 北京大学, so both the word and its parts match."""
    with _lock:
        return _content(list(_jieba().cut_for_search(text)))


@cache
def _fugashi():  # noqa: ANN202
    import fugashi

    return fugashi.Tagger()


_JA_DROP = {"助詞", "助動詞", "補助記号", "空白", "記号"}
_JA_INFLECTING = {"動詞", "形容詞", "形状詞"}


def japanese(text: str) -> list[str]:
    """MeCab/UniDic morphemes; inflecting words reduced to their dictionary form."""
    out = []
    with _lock:
        for word in _fugashi()(text):
            feature = word.feature
            if feature.pos1 in _JA_DROP:
                continue
            base = getattr(feature, "orthBase", None)
            out.append(base if feature.pos1 in _JA_INFLECTING and base and base != "*" else word.surface)
    return _content(out)


@cache
def _kiwi():  # noqa: ANN202
    from kiwipiepy import Kiwi

    return Kiwi()


_KO_KEEP = ("NN", "NR", "NP", "VV", "VA", "XR", "SL", "SH", "SN", "MAG")


def korean(text: str) -> list[str]:
    """Kiwi morphemes: nouns, verb/adjective stems, roots, foreign words and numbers.

    A noun followed by a derivational suffix is also emitted joined (분석+기 → 분석, 분석기):
    Kiwi splits a short query where it keeps the compound in running text.
    """
    with _lock:
        morphemes = _kiwi().tokenize(text)
    out = []
    for i, m in enumerate(morphemes):
        if m.tag.startswith(_KO_KEEP):
            out.append(m.form)
            following = morphemes[i + 1] if i + 1 < len(morphemes) else None
            if m.tag.startswith("NN") and following is not None and following.tag == "XSN" \
                    and following.start == m.start + m.len:
                out.append(m.form + following.form)
    return _content(out)


@cache
def _thai_tokenize():  # noqa: ANN202
    os.environ.setdefault("PYTHAINLP_DATA", str(_cache_dir("pythainlp")))
    os.environ.setdefault("PYTHAINLP_OFFLINE", "1")  # never fetch corpora in the background
    from pythainlp.tokenize import word_tokenize

    return word_tokenize


def thai(text: str) -> list[str]:
    """PyThaiNLP newmm (dictionary maximal matching on Thai character clusters: marks stay on their base)."""
    return _content(_thai_tokenize()(text, engine="newmm", keep_whitespace=False))


def load_all() -> None:
    """Load every segmenter and segment once (~2 s, ~350 MB): Kiwi's constructor and its first
    tokenization each hold the GIL for over a second, stalling every other thread of a service."""
    samples = {chinese: "中文分词", japanese: "日本語の文", korean: "한국어 문장", thai: "ภาษาไทย"}
    for segment, sample in samples.items():
        segment(sample)


def _cache_dir(name: str) -> Path:
    from babelrag.paths import cache_dir

    path = cache_dir() / name
    path.mkdir(parents=True, exist_ok=True)
    return path


SEGMENTERS = {"zh": chinese, "ja": japanese, "ko": korean, "th": thai}


def versions() -> dict[str, str]:
    from importlib.metadata import version

    return {pkg: version(pkg) for pkg in
            ("jieba", "fugashi", "unidic-lite", "kiwipiepy", "kiwipiepy_model", "pythainlp")}
