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

_PARAGRAPH = re.compile(r"\n\s*\n")
_SENTENCE_END = regex.compile(r"(?<=[.!?。！？؟।॥])\s+|(?<=[。！？])|\n")
_CJK_OR_THAI = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}]")


def approximate_tokens(text: str) -> int:
    """Subword estimate for embedders without a tokenizer: ~1.3 per word, 1 per unspaced-script char."""
    unspaced = len(_CJK_OR_THAI.findall(text))
    words = len(regex.findall(r"[\p{L}\p{N}]+", _CJK_OR_THAI.sub(" ", text)))
    return int(unspaced + 1.3 * words) + 2


def _pack(pieces: list[str], budget: int, count: TokenCounter, joiner: str) -> list[str]:
    chunks: list[str] = []
    current: list[str] = []
    for piece in pieces:
        candidate = joiner.join(current + [piece])
        if current and count(candidate) > budget:
            chunks.append(joiner.join(current))
            current = [piece]
        else:
            current.append(piece)
    if current:
        chunks.append(joiner.join(current))
    return chunks


def _hard_split(sentence: str, budget: int, count: TokenCounter) -> list[str]:
    units = sentence.split(" ") if " " in sentence.strip() else list(regex.findall(r"\X", sentence))
    joiner = " " if " " in sentence.strip() else ""
    return _pack([u for u in units if u], budget, count, joiner)


def _split_paragraph(paragraph: str, budget: int, count: TokenCounter) -> list[str]:
    if count(paragraph) <= budget:
        return [paragraph]
    sentences = [s.strip() for s in _SENTENCE_END.split(paragraph) if s and s.strip()]
    pieces: list[str] = []
    for sentence in sentences:
        pieces.extend([sentence] if count(sentence) <= budget else _hard_split(sentence, budget, count))
    return _pack(pieces, budget, count, " ")


def chunk_text(text: str, budget: int, count: TokenCounter = approximate_tokens) -> list[str]:
    if count(text) <= budget:
        return [text.strip()]
    paragraphs = [p.strip() for p in _PARAGRAPH.split(text) if p.strip()]
    pieces = [piece for paragraph in paragraphs for piece in _split_paragraph(paragraph, budget, count)]
    return _pack(pieces, budget, count, "\n\n")
