"""Pivot copies: every passage not in the pivot language, translated once at ingest and searched as an
extra path (docs/methods.md#pivot-copies).

Why: on a KB whose pages each exist in one language, a question's own-language pages get a head start (the
multilingual embedder scores a same-language distractor close, keyword search cannot match across
languages at all). Over copies that are all in one language every page competes on the same footing, and
a question asked in the pivot language matches them word for word. The translation is paid once per
passage at ingest, never per question.

A copy keeps its original's ids (passage, record, page), country and scope, so filters, deletion and the
page collapse treat it as its original; its text is the translation and its language the pivot. Copies
live beside the KB in ``_pivot.<kb>`` (the same embedder, their own keyword statistics). Each records a
digest of the text it was made from: running again translates only new or changed passages and drops the
copies of passages that are gone, and a search never serves a copy whose original changed since
(retrieve/search.py). Translations are checked as at query time (models/translate.py: loops, copied
examples, wrong language); a failed one is recorded with its reason and counted in the KB's manifest, and
the passage stands in for itself untranslated, so no page drops out of the copies' path. A model failure
is data here too: it never stops the run.
"""
from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass, field, replace

from babelrag import deadline
from babelrag.codes import language_code
from babelrag.errors import BabelragError
from babelrag.kb import KnowledgeBase
from babelrag.lang import analyzers
from babelrag.models.llm_types import LLMError
from babelrag.models.translate import Translator, translate_many
from babelrag.progress import progress
from babelrag.retrieve import bm25
from babelrag.store import manifest as manifests
from babelrag.store.base import Collection
from babelrag.store.copies import (
    ORIGINAL_LANG, REASON, SOURCE_DIGEST, TRANSLATOR, UNTRANSLATED, is_current, source_digest,
)
from babelrag.store.manifest import PivotCopiesRecord
from babelrag.store.schema import Match, StoredPoint, Where, point_id
from babelrag.types import Passage, Trace

REASON_CHARS = 200  # of a failure's reason kept on its stand-in
FAILURES_IN_A_ROW = 10  # translations in a row that got no answer at all (an endpoint down): the run stops
_URL = re.compile(r"\w+://\S+?(?=:?(?:\s|$))")  # a reason never keeps an endpoint's address (a ':' after it stays)


class TranslatorFailing(BabelragError):
    """The translator gave no answer too many times in a row (an endpoint down or refusing every request)."""


@dataclass
class PivotCopiesReport:
    """One run: copies made now, reused (their original unchanged), removed (original gone or changed),
    failed translations by reason (their passages stand in untranslated), and what translating cost: model
    calls (those served from the translation cache too, which keep the seconds they took when made) and
    model seconds."""

    kb: str
    lang: str
    translator: str
    translated: int = 0
    as_is: int = 0
    reused: int = 0
    removed: int = 0
    skipped_failed: int = 0
    failed: Counter[str] = field(default_factory=Counter)
    llm_calls: int = 0
    cached_calls: int = 0
    llm_seconds: float = 0.0
    seconds: float = 0.0
    copies: int = 0

    def summary(self) -> str:
        failed = sum(self.failed.values())
        attempted = self.translated + failed
        reasons = f" ({', '.join(f'{n} {why}' for why, n in self.failed.most_common())})" if failed else ""
        earlier = f", {self.skipped_failed} failed before (--retry-failed tries them again)" if self.skipped_failed else ""
        cost = f"{self.llm_seconds / attempted:.1f} s of model time per passage" if attempted else "nothing to translate"
        return (f"{self.translated} translated into {self.lang}, {self.as_is} already in it, {self.reused} kept, "
                f"{self.removed} removed, {failed} failed{reasons}{earlier}; {self.copies} copies; "
                f"{self.llm_calls} model calls ({self.cached_calls} cached), {cost}, {self.seconds:.0f} s in all")


def make_pivot_copies(kb: KnowledgeBase, translator: Translator, lang: str = "en", *, retry_failed: bool = False,
                      batch_size: int = 16) -> PivotCopiesReport:
    """Translate every passage of ``kb`` not in ``lang`` that has no current copy, and store the copies. A
    passage in ``lang`` is stored as it is; one whose translation fails is stored untranslated as its own
    stand-in (its page stays findable on the copies' path) and tried again only with ``retry_failed`` (a
    deterministic model fails it the same way). Another translator's copies are made again, over the old
    ones; copies for another pivot language are dropped first. The KB is locked for writes only while its
    passages are read and while each batch is stored: a passage changed meanwhile has a stale copy, never
    served and made again next run. Copies written before an interruption stay: running again resumes.
    ``TranslatorFailing`` stops a run whose translator gives no answer ``FAILURES_IN_A_ROW`` times in a row
    (a refused translation is an answer: a model that fails one language's passages does not stop the run)."""
    lang = language_code(lang, "lang")
    started = time.perf_counter()
    report = PivotCopiesReport(kb.name, lang, translator.name)
    with kb.collection.writing():
        if (record := kb.manifest.pivot_copies) is not None and record.lang != lang:
            kb.drop_pivot_copies()
        copies = kb.pivot_copies(create=True)
        assert copies is not None
        originals = {p.id: p for p in kb.collection.scroll()}
        current = {p.id: p for p in copies.scroll()}
        report.removed = _remove_stale(copies, current, {pid for pid, copy in current.items()
                                                          if is_current(copy, originals.get(pid))})
    kept = {pid for pid, copy in current.items()
            if _still_good(copy, originals.get(pid), lang, translator.name, retry_failed)}
    report.skipped_failed = sum(bool(current[pid].metadata.get(UNTRANSLATED)) for pid in kept)
    report.reused = len(kept) - report.skipped_failed
    try:
        _translate_all(kb, copies, [p for pid, p in originals.items() if pid not in kept], translator, lang,
                       batch_size, report)
    finally:  # what was done stays recorded, an interrupted run too
        with kb.collection.writing():
            _record(kb, copies, report, started)
    return report


def _still_good(copy: Passage, original: Passage | None, lang: str, translator: str, retry_failed: bool) -> bool:
    """A copy of the original as it is now, made by this translator (or needing none); a failed translation's
    stand-in only while failures are not to be tried again."""
    if not is_current(copy, original):
        return False
    if copy.metadata.get(ORIGINAL_LANG) == lang:
        return True
    return copy.metadata.get(TRANSLATOR) == translator and not (retry_failed and copy.metadata.get(UNTRANSLATED))


def _remove_stale(copies: Collection, current: dict[str, Passage], valid: set[str]) -> int:
    """Delete the copies whose original is gone or changed, a record's copies at a time (the others stay
    until a new copy replaces them: an interrupted run leaves no page without one)."""
    records = sorted({p.record_id for pid, p in current.items() if pid not in valid})
    for start in range(0, len(records), 256):
        group = set(records[start:start + 256])
        keep = tuple(point_id(pid) for pid in valid if current[pid].record_id in group)
        copies.delete(Where(must=(Match("record_id", tuple(sorted(group))),), must_not_ids=keep))
    return len(current) - len(valid)


def _translate_all(kb: KnowledgeBase, copies: Collection, todo: list[Passage], translator: Translator, lang: str,
                   batch_size: int, report: PivotCopiesReport) -> None:
    avgdl = kb.manifest.bm25.avgdl
    in_a_row = 0
    with progress(f"pivot copies of {kb.name} ({lang})", len(todo), "passages") as advance:
        for start in range(0, len(todo), batch_size):
            made: list[Passage] = []
            for passage in todo[start:start + batch_size]:
                deadline.check("translating passages")
                copy, answered = _translated(passage, translator, lang, report)
                made.append(copy)
                in_a_row = 0 if answered else in_a_row + 1
                advance(1)
                if in_a_row >= FAILURES_IN_A_ROW:
                    break
            if made:  # copies in the pivot language are analysed as such, stand-ins in their own
                vectors = kb.embedder.embed([p.text for p in made], "passage")
                with kb.collection.writing():
                    copies.upsert([StoredPoint(p, vectors[i], bm25.document_vector(analyzers.tokens(p.text, p.lang),
                                                                                   avgdl))
                                   for i, p in enumerate(made)])
            if in_a_row >= FAILURES_IN_A_ROW:
                last = _kind(str(made[-1].metadata.get(REASON)))
                raise TranslatorFailing(f"pivot-copies: {in_a_row} translations in a row failed without an answer "
                                        f"(the last: {last}); stopped, the copies made so far are kept: check the "
                                        f"translator, then run again with --retry-failed")


def _translated(passage: Passage, translator: Translator, lang: str,
                report: PivotCopiesReport) -> tuple[Passage, bool]:
    """The passage's copy, and whether the translator answered (a translation checked and refused is an
    answer; an endpoint that never replied is not). A passage already in the pivot language is its own copy:
    the copies then hold every page, and a page written in the pivot language competes there on the same
    terms as the translated ones. A failed translation stands in for itself, untranslated, its reason on it
    (a model failure never stops the run by itself, and never hides a page from the copies' path)."""
    made_from = {ORIGINAL_LANG: passage.lang, SOURCE_DIGEST: source_digest(passage)}
    if passage.lang == lang:
        report.as_is += 1
        return replace(passage, metadata=made_from), True
    trace = Trace()
    try:
        result = translate_many(translator, passage.text, passage.lang, [lang], trace)
        problem = result.failed.get(lang)
    except LLMError as error:
        result, problem = None, f"{type(error).__name__}: {error}"
    report.llm_calls += len(trace.llm_calls)  # a cached call keeps the seconds it took: the method's cost
    report.cached_calls += sum(call.cached for call in trace.llm_calls)
    report.llm_seconds += sum(call.seconds for call in trace.llm_calls)
    if problem is not None or result is None:
        reason = _URL.sub("<url>", str(problem))[:REASON_CHARS]
        report.failed[_kind(reason)] += 1
        stand_in = {**made_from, TRANSLATOR: translator.name, UNTRANSLATED: True, REASON: reason}
        return replace(passage, metadata=stand_in), bool(trace.llm_calls)
    report.translated += 1
    return replace(passage, text=result.texts[lang], lang=lang, lang_confidence=None,
                   metadata={**made_from, TRANSLATOR: translator.name}), True


def _kind(reason: str) -> str:
    """A failure's kind, for counting: its message without the model's name, numbers or quoted output. The
    innermost of its ``a: b: c`` parts that says something once the quoted or bracketed output is cut
    ("...: [Errno 111] Connection refused" says nothing of its own: the part before it is the kind; a structured
    answer's ``(parser detail): '<the model's JSON>'`` neither), a leading model name dropped ("name@fingerprint
    returned invalid JSON twice"), and never a part that still names a model (``name@fingerprint``, ``name@<url>``)."""
    said = re.split(r": ['\"\[{]", reason, maxsplit=1)[0]  # what follows is quoted output or another system's words
    said = re.split(r"(?:^|\s)['\"]", said, maxsplit=1)[0]  # so does a quote opened anywhere else
    while (shorter := re.sub(r"\s*\([^()]*\)", "", said)) != said:  # a parenthesis: the parser's detail (nested:
        said = shorter  # innermost first)
    said = re.sub(r"\s*\(.*", "", said)  # one cut short
    for part in reversed(said.split(": ")):
        kind = re.sub(r"^\S+@\S+\s+", "", re.split(r"[\"'(\[{]", part)[0]).strip(" ,.;")  # "model@fp returned…"
        if kind and "@" not in kind:
            return re.sub(r"\d+", "N", kind)
    return "unusable answer"


def _record(kb: KnowledgeBase, copies: Collection, report: PivotCopiesReport, started: float) -> None:
    copies.optimize()
    stand_ins = sum(bool(p.metadata.get(UNTRANSLATED)) for p in copies.scroll())
    report.copies, report.seconds = copies.count(), time.perf_counter() - started
    copies.write_manifest({**copies.read_manifest(), "passages": report.copies})
    record = PivotCopiesRecord(lang=report.lang, translator=report.translator, copies=report.copies,
                               failed=stand_ins, updated_at=manifests.now())
    kb.update_manifest(pivot_copies=record)
