"""The KB's language centroids: the per-language vector sums its manifest keeps stay equal to a count from the
stored vectors through every kind of write, an index without them (or with a damaged record) gets them counted,
and re-scoring's ``centered`` signal is the cosine with those centroids taken out of both sides."""
from __future__ import annotations

import base64
import contextlib
import json
from pathlib import Path

import numpy as np
import pytest

from babelrag.config import preset_config
from babelrag.ingest.pipeline import index_sources
from babelrag.kb import KnowledgeBase
from babelrag.retrieve.search import retrieve
from babelrag.store.language_vectors import SHRINK, LanguageCentroids, LanguageSums
from babelrag.store.schema import StoredPoint
from babelrag.types import Passage, SearchRequest, Trace

DOCS = [{"id": "d0", "text": "Apoteket säljer receptfria läkemedel och hjälper med recept.", "lang": "sv"},
        {"id": "d1", "text": "Pharmacies sell over-the-counter medicines.", "lang": "en"},
        {"id": "d2", "text": "Die Apotheke verkauft rezeptfreie Arzneimittel.", "lang": "de"},
        {"id": "d3", "text": "Bibliotek lånar ut böcker gratis till alla.", "lang": "sv"},
        {"id": "d4", "text": "Libraries lend books for free.", "lang": "en"}]


def _write(folder: Path, rows: list[dict]) -> str:
    source = folder / f"rows{len(list(folder.glob('rows*')))}.jsonl"
    source.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    return str(source)


def _counted_again(kb: KnowledgeBase) -> dict[str, tuple[int, np.ndarray]]:
    return LanguageSums().add(kb.collection.points()).sums


def _assert_current(kb: KnowledgeBase) -> None:
    kept = LanguageSums.parse(kb.manifest.language_vectors, kb.manifest.embedder.dim).sums
    counted = _counted_again(kb)
    assert {lang: count for lang, (count, _) in kept.items()} == {lang: c for lang, (c, _) in counted.items()} \
        == kb.manifest.languages.all
    for lang, (_, total) in counted.items():
        np.testing.assert_allclose(kept[lang][1], total, atol=1e-9)


def test_the_sums_follow_every_write_without_a_recount(tmp_path: Path, store_of, monkeypatch) -> None:  # noqa: ANN001
    """Replaced records, a record that changes language, one that loses chunks, deletes by id and by page that
    overlap, a delete of everything: each write moves the sums by what it did, and they equal a fresh count."""
    long_text = " ".join(f"Apoteket säljer läkemedel nummer {i} och ger råd om recept." for i in range(160))
    store = store_of([*DOCS, {"id": "d6", "text": long_text, "lang": "sv"}], tmp_path)
    with KnowledgeBase.open("kb", store) as kb:
        assert kb.manifest.passages > len(DOCS) + 1  # d6 is several chunks
        _assert_current(kb)
    # from here on a recount would hide a wrong change: every write must move the sums by itself
    monkeypatch.setattr(LanguageSums, "of_points", lambda *a: pytest.fail("recounted"))
    index_sources("kb", [_write(tmp_path, [{"id": "d0", "text": "Apotek: ny text om läkemedel.", "lang": "sv"},
                                           {"id": "d3", "text": "Libraries lend books to everyone.", "lang": "en"},
                                           {"id": "d6", "text": "Nu en kort text.", "lang": "sv"},
                                           {"id": "d5", "text": "Ein Buch über Bibliotheken.", "lang": "de"}])], store)
    with KnowledgeBase.open("kb", store) as kb:
        assert kb.manifest.passages == len(DOCS) + 2
        _assert_current(kb)
        assert kb.delete(ids=["d1", "d5"], doc_ids=["d1", "d3"]) == 3  # d1 matched twice, taken out once
        _assert_current(kb)
        assert set(kb.manifest.languages.all) == {"sv", "en", "de"}
        monkeypatch.undo()
        kb.delete(everything=True)
        assert kb.manifest.language_vectors == {}


def test_a_write_undone_or_copied_leaves_sums_equal_to_a_count(tmp_path: Path, store_of, monkeypatch) -> None:  # noqa: ANN001
    from babelrag.ingest import pipeline
    from babelrag.kb import copy_kb

    store = store_of(DOCS, tmp_path)
    original = pipeline.StoredPoint
    monkeypatch.setattr(pipeline, "StoredPoint", lambda *a: (_ for _ in ()).throw(OSError("disk full"))
                        if a[0].id == "d9" else original(*a))
    with pytest.raises(OSError, match="disk full"):  # d0 is replaced before d9 fails: the undo puts it back
        index_sources("kb", [_write(tmp_path, [{"id": "d0", "text": "Helt ny text.", "lang": "sv"},
                                               {"id": "d9", "text": "Aldrig skriven.", "lang": "sv"}])],
                      store, pipeline.IngestOptions(batch_size=1))
    monkeypatch.undo()
    with KnowledgeBase.open("kb", store) as kb:
        _assert_current(kb)
        assert next(p for p in kb.collection.scroll() if p.id == "d0").text == DOCS[0]["text"]
        # the copy's sums are those of the points it got, not the source's record (here right in counts only)
        wrong = LanguageSums({lang: (count, np.zeros(kb.embedder.dim)) for lang, count in kb.manifest.languages.all.items()})
        kb.update_manifest(language_vectors=wrong.stored())
        with copy_kb(kb, str(tmp_path / "elsewhere"), "copied", batch=2) as copied:
            _assert_current(copied)


def _encoded(values: np.ndarray) -> str:
    return base64.b64encode(values.astype("<f8").tobytes()).decode("ascii")


def _damaged(dim: int, counts: dict[str, int]) -> list[tuple[object, str]]:
    """Records a manifest may hold after damage or tampering, each with why it is counted again."""
    sized = 4 * -(-8 * dim // 3)
    right_counts = {lang: {"count": count, "sum": _encoded(np.zeros(dim))} for lang, count in counts.items()}
    return [(None, "not kept yet"), ({"sv": {"count": 2, "sum": "not base64!"}}, "unreadable"),
            ({"sv": {"count": 1}}, "unreadable"), ({"sv": {"count": 2, "sum": "!" * sized}}, "unreadable"),
            ({"sv": {"count": 2, "sum": _encoded(np.full(dim, np.nan))}}, "unreadable"),
            ({"sv": {"count": 2, "sum": _encoded(np.full(dim, 1e300))}}, "unreadable"),
            ({"sv": 5}, "unreadable"), ([], "unreadable"), ("x", "unreadable"),
            ({**right_counts, "sv": {"count": 1, "sum": _encoded(np.zeros(dim))}}, "counts differ")]


def test_an_index_without_the_sums_or_with_a_damaged_record_has_them_counted(tmp_path: Path, store_of) -> None:  # noqa: ANN001
    """By the search that needs them, in memory (a search never writes the KB), said in a warning, and stored by
    the next write; a record of any shape keeps no KB from opening."""
    store = store_of(DOCS + [{"id": f"x{n}", "text": f"Extra text {n}.", "lang": "en"} for n in range(10)], tmp_path)
    with KnowledgeBase.open("kb", store) as kb:
        cases = _damaged(kb.embedder.dim, kb.manifest.languages.all)
    for n, (damage, why) in enumerate(cases):
        with KnowledgeBase.open("kb", store) as kb:
            truth = _counted_again(kb)
            kb.write_manifest(kb.manifest.model_copy(update={"language_vectors": damage}))
        with KnowledgeBase.open("kb", store) as kb:
            with pytest.warns(RuntimeWarning, match=rf"counted from its stored vectors \({why}\)"):
                centroids = kb.language_centroids()
            assert kb.manifest.language_vectors == damage  # not written by a search
            expected = LanguageCentroids.of(LanguageSums(truth), kb.embedder.dim)
            assert centroids.rows == expected.rows and np.allclose(centroids.matrix, expected.matrix, atol=1e-6)
            wrong = why != "not kept yet"  # sums that went wrong are said again by the write that stores them
            with pytest.warns(RuntimeWarning, match="stored now") if wrong else contextlib.nullcontext():
                assert kb.delete(ids=[f"x{n}"]) == 1
            _assert_current(kb)


def test_counts_that_disagree_with_the_index_are_counted_again(tmp_path: Path, store_of) -> None:  # noqa: ANN001
    """Sums of another set of passages (what a manifest written back from before a write would hold)."""
    store = store_of(DOCS, tmp_path)
    with KnowledgeBase.open("kb", store) as kb:
        dim = kb.embedder.dim
        stale = LanguageSums.parse(kb.manifest.language_vectors, dim).add(
            [StoredPoint(Passage("x", "x", "x", "sv"), np.ones(dim, dtype=np.float32), None)])
        kb.write_manifest(kb.manifest.model_copy(update={"language_vectors": stale.stored()}))
        with pytest.warns(RuntimeWarning, match=r"\(counts differ\)"):
            kb.refresh_manifest()
        _assert_current(kb)


def test_the_centroids_a_search_reads_are_the_ones_after_the_last_write(tmp_path: Path, store_of) -> None:  # noqa: ANN001
    store = store_of(DOCS, tmp_path)
    with KnowledgeBase.open("kb", store) as kb:
        before = kb.language_centroids()
        assert kb.language_centroids() is before  # remembered while nothing changes
        kb.delete(ids=["d3"])
        after = kb.language_centroids()
        assert after is not before and not np.allclose(after.matrix[after.row("sv")], before.matrix[before.row("sv")])


def test_a_record_is_refused_naming_the_language_not_echoing_the_value() -> None:
    with pytest.raises(ValueError, match=r"language_vectors\.sv") as error:
        LanguageSums.parse({"sv": {"count": 1, "sum": "c2VjcmV0"}}, 384)  # 6 bytes, not 384 numbers
    assert "c2VjcmV0" not in str(error.value)
    sums = LanguageSums().add([StoredPoint(Passage("a", "a", "a", "sv"), np.full(4, 0.5, np.float32), None)] * 3)
    again = LanguageSums.parse(json.loads(json.dumps(sums.stored())), 4)
    assert again.counts() == {"sv": 3} and np.array_equal(again.sums["sv"][1], np.full(4, 1.5))


def test_a_centroid_is_shrunk_toward_the_kb_mean_and_a_missing_language_is_centered_on_the_mean() -> None:
    rng = np.random.default_rng(0)
    vectors = {lang: rng.normal(size=(n, 8)) for lang, n in (("sv", 7), ("en", 2))}
    sums = LanguageSums({lang: (len(v), v.sum(axis=0)) for lang, v in vectors.items()})
    centroids = LanguageCentroids.of(sums, 8)
    mean = np.vstack(list(vectors.values())).mean(axis=0)
    for lang, v in vectors.items():
        expected = (v.sum(axis=0) + SHRINK * mean) / (len(v) + SHRINK)
        np.testing.assert_allclose(centroids.matrix[centroids.row(lang)], expected, rtol=1e-5)
    np.testing.assert_allclose(centroids.matrix[centroids.row("th")], mean, rtol=1e-5)
    query, passages = rng.normal(size=8), rng.normal(size=(3, 8)).astype(np.float32)
    got = centroids.cosines(query, "en", passages, ["sv", "en", "th"])
    q = query - centroids.matrix[centroids.row("en")]
    for row, lang in enumerate(["sv", "en", "th"]):
        p = passages[row] - centroids.matrix[centroids.row(lang)]
        assert got[row] == pytest.approx(p @ q / np.linalg.norm(p) / np.linalg.norm(q), rel=1e-5)


def test_the_centred_query_takes_its_languages_centroid_out_and_only_where_that_can_reorder() -> None:
    rng = np.random.default_rng(1)
    vectors = {lang: rng.normal(size=(n, 8)) for lang, n in (("zh", 9), ("en", 3))}
    centroids = LanguageCentroids.of(LanguageSums({lang: (len(v), v.sum(axis=0)) for lang, v in vectors.items()}), 8)
    query = rng.normal(size=8)
    centred = centroids.centred_query(query, "zh")
    expected = query - centroids.matrix[centroids.row("zh")]
    np.testing.assert_allclose(centred, expected / np.linalg.norm(expected), rtol=1e-5)
    assert centroids.centred_query(query, "th") is None  # no passage in the query's language: nothing to take out
    alone = LanguageCentroids.of(LanguageSums({"zh": (9, vectors["zh"].sum(axis=0))}), 8)
    assert alone.centred_query(query, "zh") is None  # one language: every passage shares the offset


def test_retrieval_gives_every_candidate_its_centered_cosine(xquad_store: str) -> None:
    """Against the definition, computed here from the stored points: each language's mean vector pulled toward the
    KB's mean by ``SHRINK`` passages, out of the passage and (the question's language's) out of the question."""
    with KnowledgeBase.open("xq", xquad_store) as kb:
        request = SearchRequest("Who won Super Bowl 50?", "xq", "en")
        found = retrieve(kb, request, preset_config("default"), Trace(), rescoring=True)
        points = {point.passage.id: point for point in kb.collection.points()}
        vectors = np.vstack([point.dense for point in points.values()]).astype(np.float64)
        langs = np.array([point.passage.lang for point in points.values()])
        mean = vectors.mean(axis=0)
        centroid = {lang: (vectors[langs == lang].sum(axis=0) + SHRINK * mean) / ((langs == lang).sum() + SHRINK)
                    for lang in set(langs)}
        question = kb.query_vector(request.text) - centroid["en"]
        expected = []
        for hit in found.hits:
            passage = points[hit.passage.id].dense - centroid[hit.passage.lang]
            expected.append(passage @ question / np.linalg.norm(passage) / np.linalg.norm(question))
        assert len(found.hits) > 10 and len({h.passage.lang for h in found.hits}) > 1
        assert [h.signals["centered"] for h in found.hits] == pytest.approx(expected, abs=1e-5)
        # not the raw cosine under another name: the centroids move every candidate by its language's offset
        assert not np.allclose([h.signals["centered"] for h in found.hits], [h.signals["cosine"] for h in found.hits],
                               atol=1e-3)


def test_a_write_killed_after_its_manifest_is_undone_with_its_sums(tmp_path: Path, store_of, monkeypatch) -> None:  # noqa: ANN001
    """Killed between the manifest (new sums) and the journal's end: the next open puts the old points back, and
    the sums with them, though no language's count changed."""
    from babelrag.store import journal

    store = store_of(DOCS, tmp_path)
    monkeypatch.setattr(journal, "end", lambda collection: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        index_sources("kb", [_write(tmp_path, [{"id": "d0", "text": "Helt annan text om bibliotek.", "lang": "sv"}])],
                      store)
    monkeypatch.undo()
    with KnowledgeBase.open("kb", store) as kb:
        assert next(p for p in kb.collection.scroll() if p.id == "d0").text == DOCS[0]["text"]
        _assert_current(kb)


def test_a_search_counting_an_old_index_stops_at_its_deadline_and_remembers_nothing(tmp_path: Path, store_of) -> None:  # noqa: ANN001
    from babelrag import deadline

    store = store_of(DOCS, tmp_path)
    with KnowledgeBase.open("kb", store) as kb:
        kb.write_manifest(kb.manifest.model_copy(update={"language_vectors": None}))  # an index from before the sums
        with deadline.limit(0.0), pytest.warns(RuntimeWarning, match="not kept yet"), \
                pytest.raises(deadline.DeadlineExceeded, match="counting language centroids"):
            kb.language_centroids()
        with pytest.warns(RuntimeWarning, match="not kept yet"):  # counted afresh, not a half count remembered
            centroids = kb.language_centroids()
        expected = LanguageCentroids.of(LanguageSums(_counted_again(kb)), kb.embedder.dim)
        assert centroids.rows == expected.rows and np.allclose(centroids.matrix, expected.matrix, atol=1e-6)
