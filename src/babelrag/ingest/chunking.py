"""Paragraph-aware chunking under a token budget.

Paragraphs are packed whole while they fit; a paragraph over budget is cut at sentence ends,
and a sentence over budget at word (or character) boundaries. Chunks never overlap: every
chunk keeps its document's ``doc_id``, so a hit on any chunk counts for the page.
"""
from __future__ import annotations

import re
from collections.abc import Callable

import regex

TokenCounter = Callable[[str], int]
MAX_CHARS_PER_TOKEN = 8  # no chunk is longer than this many characters per token of its budget

_PARAGRAPH = re.compile(r"\n\s*\n")
_SENTENCE_END = regex.compile(r"(?<=[.!?。！？؟।॥])\s+|(?<=[。！？])|\n")
_CJK_OR_THAI = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}]")


def approximate_tokens(text: str) -> int:
    """Subword estimate for embedders without a tokenizer: ~1.3 per word, 1 per unspaced-script char."""
    unspaced = len(_CJK_OR_THAI.findall(text))
    words = len(regex.findall(r"[\p{L}\p{N}]+", _CJK_OR_THAI.sub(" ", text)))
    return int(unspaced + 1.3 * words) + 2


def _pack(pieces: list[str], budget: int, count: TokenCounter, joiner: str) -> list[str]:
    """Greedy packing in one pass: each piece is counted once (not the growing chunk again and again,
    which was quadratic on long texts), less the counter's fixed cost per call (special tokens). A sum
    of piece counts can differ from the joined text's, so each chunk is checked and, if over, halved."""
    fixed, most_chars = count(""), budget * MAX_CHARS_PER_TOKEN
    groups: list[list[str]] = []
    current: list[str] = []
    used = chars = 0
    for piece in pieces:
        size = max(1, count(piece) - fixed)
        if current and (fixed + used + size > budget or chars + len(piece) > most_chars):
            groups.append(current)
            current, used, chars = [], 0, 0
        current.append(piece)
        used, chars = used + size, chars + len(piece) + len(joiner)
    if current:
        groups.append(current)
    chunks: list[str] = []
    for group in groups:
        text = joiner.join(group)
        if len(group) > 1 and not _fits(text, budget, count):
            middle = len(group) // 2
            chunks += _pack(group[:middle], budget, count, joiner) + _pack(group[middle:], budget, count, joiner)
        else:
            chunks.append(text)
    return chunks


def _hard_split(sentence: str, budget: int, count: TokenCounter) -> list[str]:
    """A sentence over budget: at spaces, else at grapheme boundaries; a unit longer than a chunk may be
    (an unspaced blob, which a word counter would call one token) is cut into windows first. Linear."""
    spaced = " " in sentence.strip()
    units = [u for u in sentence.split(" ") if u] if spaced else [sentence]
    pieces = [part for unit in units for part in
              ([unit] if len(unit) <= budget else regex.findall(r"\X{1,%d}" % budget, unit))]
    if not spaced:  # unspaced scripts: about one token per grapheme, so windows of half a budget fit
        pieces = [part for piece in pieces for part in regex.findall(r"\X{1,%d}" % max(1, budget // 2), piece)]
    return _pack(pieces, budget, count, " " if spaced else "")


def _fits(text: str, budget: int, count: TokenCounter) -> bool:
    """Under the token budget, and no longer than any text of that many tokens could be."""
    return len(text) <= budget * MAX_CHARS_PER_TOKEN and count(text) <= budget


def _split_paragraph(paragraph: str, budget: int, count: TokenCounter) -> list[str]:
    if _fits(paragraph, budget, count):
        return [paragraph]
    sentences = [s.strip() for s in _SENTENCE_END.split(paragraph) if s and s.strip()]
    pieces: list[str] = []
    for sentence in sentences:
        pieces.extend([sentence] if _fits(sentence, budget, count) else _hard_split(sentence, budget, count))
    return _pack(pieces, budget, count, " ")


def chunk_text(text: str, budget: int, count: TokenCounter = approximate_tokens) -> list[str]:
    if _fits(text, budget, count):
        return [text.strip()]
    paragraphs = [p.strip() for p in _PARAGRAPH.split(text) if p.strip()]
    pieces = [piece for paragraph in paragraphs for piece in _split_paragraph(paragraph, budget, count)]
    return _pack(pieces, budget, count, "\n\n")
