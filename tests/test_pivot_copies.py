"""Pivot copies made at ingest: made once, refreshed when their original changes, never served stale, searched
as an extra path that returns the original passages, gone with the passages they copy.

The translator is handed in (as every model is): a fixed table of real translations, so these tests check
our bookkeeping and search, not a model's quality (benchmarks/pivot_copies.py measures that with the LLM).
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from babelrag.config import preset_config
from babelrag.errors import ConfigError
from babelrag.ingest.pivot_copies import TranslatorFailing, make_pivot_copies
from babelrag.ingest.pipeline import IngestOptions, index_sources
from babelrag.kb import KnowledgeBase, drop_kb
from babelrag.models.llm_types import LLMError
from babelrag.models.translate import Translation
from babelrag.retrieve.fusion import fuse
from babelrag.relevance.model import default_model, describe
from babelrag.retrieve.pipeline import Searcher
from babelrag.store.base import open_store
from babelrag.types import Hit, Passage, Question, Ranking

ROWS = [
    {"id": "sv1", "doc_id": "malmo", "lang": "sv", "text": "Malmö är Sveriges tredje största stad och ligger i Skåne. "
     "Staden är känd för Öresundsbron som förbinder Sverige med Danmark."},
    {"id": "pl1", "doc_id": "krakow", "lang": "pl", "text": "Kraków jest drugim co do wielkości miastem w Polsce. "
     "Wawel był siedzibą królów polskich przez wieki."},
    {"id": "en1", "doc_id": "oslo", "lang": "en", "text": "Oslo is the capital of Norway and its most populous city, "
     "located at the end of the Oslofjord."},
    {"id": "de1", "doc_id": "bremen", "lang": "de", "text": "Bremen ist eine Hansestadt im Nordwesten Deutschlands "
     "an der Weser. Die Bremer Stadtmusikanten sind ein bekanntes Märchen."},
]
ENGLISH = {
    ROWS[0]["text"]: "Malmö is Sweden's third largest city and lies in Scania. The city is known for the Öresund "
                     "Bridge, which connects Sweden with Denmark.",
    ROWS[1]["text"]: "Kraków is the second largest city in Poland. Wawel was the seat of the Polish kings for centuries.",
}
BRIDGE = Question("Which bridge connects Sweden and Denmark?", lang="en")
WITH_COPIES = {"extra_paths": ["pivot_copies"]}


class TableTranslator:
    """Translates the texts it knows; any other text fails as a checked translation would (de here)."""

    def __init__(self, table: dict[str, str], error: bool | str = False, name: str = "table"):
        self.table, self.error, self.calls, self.name = table, error, 0, name

    def translate_targets(self, text: str, src: str, targets: Sequence[str]) -> dict[str, Translation]:
        self.calls += 1
        if self.error:
            raise LLMError(self.error if isinstance(self.error, str) else "endpoint unreachable")
        return {t: Translation(self.table[text]) if text in self.table else Translation("", problem="came back in "
                                                                                            "another language")
                for t in targets}


def build(tmp_path: Path, rows: list[dict] = ROWS, name: str = "cities") -> str:
    source = tmp_path / f"{name}-{len(list(tmp_path.glob('*.jsonl')))}.jsonl"
    source.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    store = str(tmp_path / "store")
    index_sources(name, [str(source)], store)
    return store


def test_copies_are_made_once_and_only_what_changed_is_translated_again(tmp_path: Path) -> None:
    store = build(tmp_path)
    translator = TableTranslator(ENGLISH)
    with KnowledgeBase.open("cities", store) as kb:
        first = make_pivot_copies(kb, translator)
        assert (first.translated, first.as_is, first.reused, dict(first.failed), first.copies) == (
            2, 1, 0, {"came back in another language": 1}, 4)
        record = kb.manifest.pivot_copies
        assert (record.lang, record.copies, record.failed) == ("en", 4, 1)
        stored = kb.pivot_copies().fetch(["en1", "de1"])
        assert stored["en1"].passage.text == ROWS[2]["text"]  # in the pivot already: its own copy
        assert (stored["de1"].passage.text, stored["de1"].passage.lang) == (ROWS[3]["text"], "de")  # failed: stands in
        copy = kb.pivot_copies().fetch(["sv1"])["sv1"].passage
        assert (copy.lang, copy.text, copy.doc_id, copy.metadata["original_lang"]) == ("en", ENGLISH[ROWS[0]["text"]],
                                                                                    "malmo", "sv")
        calls = translator.calls
        again = make_pivot_copies(kb, translator)
    assert (again.translated, again.reused, again.skipped_failed, translator.calls) == (0, 3, 1, calls)
    changed = {**ROWS[0], "text": "Malmö ligger vid Öresund."}
    build(tmp_path, [changed])
    translator.table[changed["text"]] = "Malmö lies on the Öresund."
    with KnowledgeBase.open("cities", store) as kb:
        refreshed = make_pivot_copies(kb, translator, retry_failed=True)
        assert (refreshed.translated, refreshed.reused, refreshed.removed) == (1, 2, 1)  # sv1 changed (de1 retried)
        assert sum(refreshed.failed.values()) == 1  # de tried again (--retry-failed), fails again
        assert kb.pivot_copies().fetch(["sv1"])["sv1"].passage.text == "Malmö lies on the Öresund."
        other = make_pivot_copies(kb, TableTranslator(translator.table, name="a better one"))
    assert (other.translated, other.reused, other.skipped_failed) == (2, 1, 0)  # another translator: made again
    assert sum(other.failed.values()) == 1


def test_a_model_failure_is_recorded_and_the_run_goes_on(tmp_path: Path) -> None:
    store = build(tmp_path)
    with KnowledgeBase.open("cities", store) as kb:
        report = make_pivot_copies(kb, TableTranslator(ENGLISH, error=True))
        stand_ins = {p.id: p for p in kb.pivot_copies().scroll() if p.metadata.get("untranslated")}
        assert kb.manifest.pivot_copies.failed == 3
    assert report.translated == 0 and dict(report.failed) == {"endpoint unreachable": 3} and report.copies == 4
    assert set(stand_ins) == {"sv1", "pl1", "de1"} and stand_ins["sv1"].text == ROWS[0]["text"]
    assert "endpoint unreachable" in stand_ins["sv1"].metadata["reason"]


@pytest.mark.parametrize("message, kind", [
    ("openai:qwen2.5-coder-1.5b-cc324af070c2@http://127.0.0.1:8089/v1: translation cut at its budget of 512 tokens",
     "translation cut at its budget of N tokens"),
    ("qwen2.5-coder-0.5b@1d9614638d18: translation cut at its budget of 256 tokens",
     "translation cut at its budget of N tokens"),
    ("LLM endpoint https://user:pw@llm.example.org:8443/v1?key=a:b unreachable after 3 tries: [Errno 111] Connection "
     "refused", "LLM endpoint <url> unreachable after N tries"),
    ("LLM endpoint http://[::1] unreachable after 3 tries: [Errno 111] Connection refused",
     "LLM endpoint <url> unreachable after N tries"),
    # the structured-output error quotes the model's answer (JSON, with ": " of its own) after the parser's detail
    ("translator: qwen2.5-coder-0.5b@1d9614638d18 returned invalid JSON twice, cut at 256 then 512 tokens (Invalid "
     "JSON: EOF while parsing a string at line 1 column 80): '{\"en\": \"The city: a port\"", "returned invalid JSON twice, cut "
     "at N then N tokens"),
    # nested parentheses are cut whole, and a quote without ": " before it is output too
    ("m@fp returned invalid JSON twice (Value error, bad (nested) thing): 'x'", "returned invalid JSON twice"),
    ("m@fp translated to 'de: ein Satz' in the wrong language", "translated to")])
def test_a_failure_is_counted_by_its_kind_without_the_model_or_its_endpoint(tmp_path: Path, message: str,
                                                                             kind: str) -> None:
    store = build(tmp_path)
    with KnowledgeBase.open("cities", store) as kb:
        report = make_pivot_copies(kb, TableTranslator({}, error=message))
        reasons = [p.metadata["reason"] for p in kb.pivot_copies().scroll() if p.metadata.get("untranslated")]
    # an endpoint's model fails as the local one does: one kind, counted together, no address kept anywhere
    assert dict(report.failed) == {kind: 3}
    assert len(reasons) == 3 and not any(part in reason for reason in reasons
                                         for part in ("127.0.0.1", "8089", "example.org", "pw", "::1", "<url>]"))


def test_a_translator_failing_again_and_again_stops_the_run_and_keeps_what_it_made(tmp_path: Path) -> None:
    rows = [{"id": f"de{n}", "doc_id": f"d{n}", "lang": "de", "text": f"Absatz Nummer {n} über die Stadt Bremen."}
            for n in range(14)]
    store = build(tmp_path, rows)
    with KnowledgeBase.open("cities", store) as kb:
        with pytest.raises(TranslatorFailing, match="10 translations in a row failed without an answer"):
            make_pivot_copies(kb, TableTranslator({}, error=True), batch_size=4)
        assert kb.pivot_copies().count() == 10 and kb.manifest.pivot_copies.failed == 10  # stored as they came


def test_the_copy_path_finds_a_page_in_another_language_and_returns_the_original(tmp_path: Path) -> None:
    store = build(tmp_path)
    with KnowledgeBase.open("cities", store) as kb:
        make_pivot_copies(kb, TableTranslator(ENGLISH))
        result = Searcher(kb, preset_config("default", WITH_COPIES)).search(BRIDGE)
    top = result.evidence.hits[0]
    assert top.passage.doc_id == "malmo" and top.path.startswith("pivot_copies")
    assert (top.passage.lang, top.passage.text) == ("sv", ROWS[0]["text"])  # the original, not the copy
    originals = next(s for s in result.trace.steps if s.stage == "originals")
    assert originals.data["stale"] == 0 and originals.data["passed"] == 4


def test_the_pivot_copies_preset_max_merges_probabilities_and_its_rrf_twin_rank_fuses(tmp_path: Path) -> None:
    """``--preset pivot-copies`` max-merges the copy path with the question's own (both scored as P(relevant) by the
    learned stage, the copy path by weights of its own); ``pivot-copies-rrf`` rank-fuses them, for a KB whose
    embedder has no relevance model."""
    store = build(tmp_path)
    with KnowledgeBase.open("cities", store) as kb:
        make_pivot_copies(kb, TableTranslator(ENGLISH))
        found = {preset: Searcher(kb, preset_config(preset)).search(BRIDGE) for preset in ("pivot-copies",
                                                                                             "pivot-copies-rrf")}
    for preset, method in (("pivot-copies", "max"), ("pivot-copies-rrf", "rrf")):
        result = found[preset]
        merge = next(s for s in result.trace.steps if s.stage == "merge")
        assert merge.label == method and "malmo" in result.evidence.doc_ids()[:2]
    top = found["pivot-copies"].evidence.hits[0]
    assert top.passage.doc_id == "malmo" and top.path.startswith("pivot_copies")  # the copy path's score won
    assert describe(default_model())["ranked_by_own_weights"] == ["pivot_copies"]
    assert 0.5 < found["pivot-copies"].evidence.hits[0].score <= 1.0  # a probability, not an RRF total
    assert found["pivot-copies-rrf"].evidence.hits[0].score < 0.05


def test_a_copy_whose_original_changed_is_never_served(tmp_path: Path) -> None:
    store = build(tmp_path)
    with KnowledgeBase.open("cities", store) as kb:
        make_pivot_copies(kb, TableTranslator(ENGLISH))
    build(tmp_path, [{**ROWS[0], "text": "Malmö har många parker och en lång strand."}])  # copies not made again
    with KnowledgeBase.open("cities", store) as kb:
        result = Searcher(kb, preset_config("default", WITH_COPIES)).search(BRIDGE)
    originals = next(s for s in result.trace.steps if s.stage == "originals")
    assert originals.data["stale"] == 1
    assert all(not (h.passage.id == "sv1" and h.path.startswith("pivot_copies")) for h in result.evidence.hits)


def test_a_language_restriction_applies_to_the_originals(tmp_path: Path) -> None:
    store = build(tmp_path)
    with KnowledgeBase.open("cities", store) as kb:
        make_pivot_copies(kb, TableTranslator(ENGLISH))
        # one candidate per arm: the engine must apply the restriction (the best copy overall is Malmö's)
        result = Searcher(kb, preset_config("default", {**WITH_COPIES, "langs": ["pl"], "candidates": 1})).search(BRIDGE)
    assert [h.passage.lang for h in result.evidence.hits] == ["pl"]
    originals = next(s for s in result.trace.steps if s.stage == "originals").data
    assert originals["copies"] == originals["passed"] == 1 and originals["stale"] == 0  # the copy path's own


def test_searching_copies_a_kb_does_not_have_is_a_named_configuration_error(tmp_path: Path) -> None:
    store = build(tmp_path)
    with KnowledgeBase.open("cities", store) as kb, pytest.raises(ConfigError, match="babelrag pivot-copies --kb cities"):
        Searcher(kb, preset_config("default", WITH_COPIES)).search(BRIDGE)


def test_copies_go_with_the_passages_they_copy(tmp_path: Path) -> None:
    store = build(tmp_path)
    with KnowledgeBase.open("cities", store) as kb:
        make_pivot_copies(kb, TableTranslator(ENGLISH))
        kb.delete(ids=["sv1"])
        assert set(p.id for p in kb.pivot_copies().scroll()) == {"pl1", "en1", "de1"}
        assert kb.manifest.pivot_copies.copies == 3
    drop_kb(store, "cities")
    assert not open_store(store).exists("_pivot.cities") and "cities" not in open_store(store).list()


def test_max_merge_credits_the_path_that_gave_a_passage_its_score() -> None:
    passage = Passage("p", "text", "page", "sv")
    first = Ranking("a", "learned", (Hit(passage, 0.2, "as_written/dense"),))
    second = Ranking("b", "learned", (Hit(passage, 0.9, "pivot_copies/bm25"),))
    merged = fuse([first, second], "max", "merged")
    assert (merged.hits[0].score, merged.hits[0].path) == (0.9, "pivot_copies/bm25")


def test_copies_follow_the_kb_they_copy(tmp_path: Path) -> None:
    """Another pivot language remakes them; a rebuilt KB (or a new one of the same name) has none until made."""
    store = build(tmp_path)
    with KnowledgeBase.open("cities", store) as kb:
        make_pivot_copies(kb, TableTranslator(ENGLISH))
        german = make_pivot_copies(kb, TableTranslator(ENGLISH), "de")
        assert kb.manifest.pivot_copies.lang == "de" and german.as_is == 1 and german.reused == 0
        assert kb.pivot_copies().fetch(["de1"])["de1"].passage.metadata.get("untranslated") is None  # its own copy
    source = tmp_path / "again.jsonl"
    source.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in ROWS), encoding="utf-8")
    index_sources("cities", [str(source)], store, IngestOptions(rebuild=True))
    with KnowledgeBase.open("cities", store) as kb:
        assert kb.pivot_copies() is None
        with pytest.raises(ConfigError, match="has no pivot copies"):
            Searcher(kb, preset_config("default", WITH_COPIES)).search(BRIDGE)
        assert make_pivot_copies(kb, TableTranslator(ENGLISH)).translated == 2  # made anew for this KB


def test_only_the_changed_chunk_of_a_record_is_translated_again(tmp_path: Path) -> None:
    first, second = "Malmö är en stad i Skåne vid Öresund. " * 12, "Staden har en stor hamn och många parker. " * 12
    source = tmp_path / "long.jsonl"
    source.write_text(json.dumps({"id": "long", "lang": "sv", "text": f"{first}\n\n{second}"}), encoding="utf-8")
    store = str(tmp_path / "store")
    index_sources("long", [str(source)], store, IngestOptions(chunk_tokens=200))
    translator = LengthTranslator()
    with KnowledgeBase.open("long", store) as kb:
        assert make_pivot_copies(kb, translator).translated == 2
    source.write_text(json.dumps({"id": "long", "lang": "sv", "text": f"{first}\n\n{'Staden har en ny hamn och nya torg. ' * 12}"}),
                      encoding="utf-8")
    index_sources("long", [str(source)], store)
    with KnowledgeBase.open("long", store) as kb:
        again = make_pivot_copies(kb, translator)
        assert (again.translated, again.reused, again.removed) == (1, 1, 1)
        assert {p.id for p in kb.pivot_copies().scroll()} == {"long#c0", "long#c1"}


class LengthTranslator:
    """Any text into a placeholder English one of about its length (the chunks' bookkeeping under test)."""

    name = "length"

    def translate_targets(self, text: str, src: str, targets: Sequence[str]) -> dict[str, Translation]:
        return {t: Translation("words " * max(1, len(text.split()))) for t in targets}
