"""Per-language analysis for keyword search: the terms BM25 sees.

The engine never tokenizes: it receives our terms (as sparse vectors), so CJK and Thai are
segmented by real segmenters and every other script keeps its combining marks inside words.
"""
from __future__ import annotations

import threading
import unicodedata
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable
from functools import cache
from importlib.metadata import version

import regex
import Stemmer

from babelrag.lang import segmenters
from babelrag.lang.languages import SNOWBALL

# Bump when the term recipe changes: indexes built under another scheme are refused.
ANALYZER_SCHEME = 1

_WORD = regex.compile(r"[\p{L}\p{M}\p{N}]+")
# Scripts written without spaces; a run of them outside its own language is cut into bigrams.
_UNSPACED = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}]")
_THAI = regex.compile(r"\p{Thai}")
_GRAPHEME = regex.compile(r"\X")


# NFKC decomposes Thai SARA AM (ำ) and Lao AM (ຳ) into NIKHAHIT + AA, which splits dictionary
# words (น้ำแข็ง → น้ํา + แข็ง); put them back together.
_AM_PAIRS = (("\u0e4d\u0e32", "\u0e33"), ("\u0ecd\u0eb2", "\u0eb3"))


def normalize(text: str) -> str:
    """NFKC folds width and compatibility forms (Ｔｏｋｙｏ → Tokyo); casefold handles ß, Σ and friends."""
    text = unicodedata.normalize("NFKC", text).casefold()
    for decomposed, composed in _AM_PAIRS:
        text = text.replace(decomposed, composed)
    return text


@cache
def _stemmer(lang: str) -> Callable[[list[str]], list[str]] | None:
    algorithm = SNOWBALL.get(lang)
    return Stemmer.Stemmer(algorithm).stemWords if algorithm else None


def _bigrams(run: str) -> list[str]:
    """Grapheme bigrams (marks stay on their base): the standard fallback for unsegmented scripts."""
    graphemes = _GRAPHEME.findall(run)
    if len(graphemes) < 2:
        return graphemes
    return [a + b for a, b in zip(graphemes, graphemes[1:])]


def _words(text: str, lang: str | None) -> list[str]:
    stem = _stemmer(lang) if lang else None
    out: list[str] = []
    plain: list[str] = []
    for run in _WORD.findall(text):
        if _THAI.search(run):
            out.extend(segmenters.thai(run))
        elif _UNSPACED.search(run):
            out.extend(_bigrams(run))
        else:
            plain.append(run)
    out.extend(stem(plain) if stem else plain)
    return out


def tokens(text: str, lang: str | None) -> list[str]:
    """The terms of ``text`` read as language ``lang`` (None or unknown: script-based fallback)."""
    text = normalize(text)
    segment = segmenters.SEGMENTERS.get(lang or "")
    if segment is not None:
        return segment(text)
    return _words(text, lang)


# A query is analyzed by its path's keyword arm and again by the learned re-scorer (its terms' coverage), and a
# question's paths and later searches often repeat a text: the terms of the last queries are kept, only those of a
# query and an analysis both short enough (NFKC can make a text many times longer), so what is kept stays under about
# 256 × 30 KB. A longer one is analyzed every time.
QUERIES_KEPT = 256
QUERY_CHARS_KEPT = 2_000  # every question the service accepts (server/schemas.py)
TERMS_KEPT = 200  # an XQuAD question has about 10-20
_kept: OrderedDict[tuple[tuple[str, str | None], ...], tuple[str, ...]] = OrderedDict()
_kept_lock = threading.Lock()


def query_terms(pieces: Iterable[tuple[str, str | None]]) -> tuple[str, ...]:
    """The terms of a query's (text, language) pieces, repeats kept (as ``tokens`` gives them, piece by piece)."""
    key = tuple((text, lang) for text, lang in pieces)
    with _kept_lock:
        terms = _kept.get(key)
        if terms is not None:
            _kept.move_to_end(key)
            return terms
    terms = tuple(term for text, lang in key for term in tokens(text, lang))
    if sum(len(text) for text, _ in key) <= QUERY_CHARS_KEPT and len(terms) <= TERMS_KEPT \
            and sum(map(len, terms)) <= QUERY_CHARS_KEPT:
        with _kept_lock:
            _kept[key] = terms
            while len(_kept) > QUERIES_KEPT:
                _kept.popitem(last=False)
    return terms


def forget_queries() -> None:
    """Every kept query analysis dropped, process-wide (every KB's): a benchmark times each search as a new
    question's."""
    with _kept_lock:
        _kept.clear()


def term_id(term: str) -> int:
    """A stable 32-bit id per term (no vocabulary to store or share between adapters)."""
    return zlib.crc32(term.encode("utf-8"))


def versions() -> dict[str, str]:
    """What shapes the terms; recorded in every index manifest and checked when it is opened."""
    return {"scheme": str(ANALYZER_SCHEME), "PyStemmer": version("PyStemmer"),
            "regex": version("regex"), **segmenters.versions()}
