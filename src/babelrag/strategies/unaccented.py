"""The question as written, and beside it the same question without its accents.

Keyword search matches words exactly as analysed, and analysis keeps diacritics (``Malmö`` and ``Malmo``
are different terms). Passages exported to plain ASCII, typed on a keyboard without the letters, or written
without tone marks (Vietnamese, Yoruba) never match an accented question on those words. The second path
searches the question with its combining marks removed (NFD, marks dropped: ``é → e``, ``ö → o``; letters
that are not a base letter plus a mark, such as ``ß``, ``ø`` or ``ı``, stay) and is re-scored against the
question as written, so the two paths' scores are on one scale for the max-merge. A question without
accents plans the one path only. No model is called.
"""
from __future__ import annotations

import unicodedata
from typing import TYPE_CHECKING

from babelrag.models.bundle import Models
from babelrag.registry import STRATEGIES, Facts
from babelrag.search_config import SearchConfig
from babelrag.strategies.scope import path_filter
from babelrag.types import Question, SearchRequest, Trace

if TYPE_CHECKING:
    from babelrag.kb import KnowledgeBase


def without_accents(text: str) -> str:
    """``text`` with every combining mark removed, recomposed (NFC) so untouched letters keep their form."""
    decomposed = unicodedata.normalize("NFD", text)
    return unicodedata.normalize("NFC", "".join(c for c in decomposed if not unicodedata.combining(c)))


@STRATEGIES.register("unaccented", facts=Facts(paths="several", client_choosable=True),
                     about="the question as written and without its accents, for passages written without them")
class Unaccented:
    name = "unaccented"

    def __init__(self, models: Models) -> None:
        """Calls no model: the constructor every strategy shares."""

    def plan(self, question: Question, kb: KnowledgeBase, config: SearchConfig, trace: Trace) -> list[SearchRequest]:
        flt = path_filter(question, config, kb)
        as_written = SearchRequest(question.text, kb.name, question.lang, flt, "as_written")
        folded = without_accents(question.text)
        if folded == question.text:
            return [as_written]
        return [as_written, SearchRequest(folded, kb.name, question.lang, flt, self.name, rerank_text=question.text)]
