"""What a pivot copy (ingest/pivot_copies.py) records about the passage it translates, so that whoever
reads copies — the ingest run that refreshes them, the search that serves them — agrees on which are current."""
from __future__ import annotations

from dataclasses import replace

from babelrag.json_store import digest
from babelrag.store.schema import ORIGINAL_LANG, Match, Where, where_for
from babelrag.types import Passage, PassageFilter

SOURCE_DIGEST = "source_digest"  # copy metadata: digest of the original it was made from
UNTRANSLATED = "untranslated"  # copy metadata: its translation failed; the original stands in for itself
REASON = "reason"  # copy metadata on a stand-in: why its translation failed (shortened)
TRANSLATOR = "translator"  # copy metadata: the translator that made it (another one makes the copies again)


def source_digest(passage: Passage) -> str:
    """What a copy must have been made from to stand for ``passage``: its text and language, and what filters
    read (page, country, scope), so a copy never answers for a passage that has moved out of a filter."""
    return digest({"text": passage.text, "lang": passage.lang, "doc_id": passage.doc_id, "country": passage.country,
                   "scope": passage.scope})


def is_current(copy: Passage, original: Passage | None) -> bool:
    """The copy still translates ``original`` (which exists and is unchanged since)."""
    return original is not None and copy.metadata.get(SOURCE_DIGEST) == source_digest(original)


def copies_where(flt: PassageFilter) -> Where | None:
    """A path's filter over the copies. A language restriction means the originals' languages (a copy's own is
    the pivot): the engine applies it, so the path still gets its full count of candidates."""
    where = where_for(replace(flt, langs=()))
    if not flt.langs:
        return where
    by_original = Match(f"metadata.{ORIGINAL_LANG}", tuple(flt.langs))
    return replace(where, must=(*where.must, by_original)) if where else Where(must=(by_original,))
