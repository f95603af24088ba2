"""The HTTP service: endpoints, security and limits, a soak with concurrent ingest on loopback, a restart
mid-ingest, and fuzzing every endpoint with hypothesis (no 5xx, ever)."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from babelrag.ingest.pipeline import index_sources
from babelrag.server.app import create_app
from babelrag.server.service import Busy, Gate, Service
from conftest import ThreadedServer

KEY = "test-key-0123456789"
DOCS = [{"id": f"d{i}", "text": text, "lang": lang, "country": country}
        for i, (text, lang, country) in enumerate([
            ("Apoteket säljer receptfria läkemedel i hela Sverige.", "sv", "SE"),
            ("Swedish pharmacies sell over-the-counter medicines.", "en", "SE"),
            ("Apteka sprzedaje leki bez recepty w całej Polsce.", "pl", "PL"),
            ("Polish pharmacies sell medicines without prescription.", "en", "PL")])]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("served")
    (folder / "docs.jsonl").write_text("\n".join(json.dumps(d, ensure_ascii=False) for d in DOCS), encoding="utf-8")
    index_sources("pharma", [str(folder / "docs.jsonl")], str(folder / "store"))
    return str(folder / "store")


@pytest.fixture(scope="module")
def client(store: str, tmp_path_factory: pytest.TempPathFactory):
    runs = tmp_path_factory.mktemp("runs")
    service = Service(store, runs, frozenset({KEY}), max_body=64 << 10, defaults={"generate_k": 2, "answer_tokens": 16})
    with TestClient(create_app(service), base_url="http://127.0.0.1") as test_client:
        test_client.runs = runs
        yield test_client


def test_health_presets_kbs_and_page(client: TestClient) -> None:
    assert client.get("/health").json()["status"] == "ok"
    assert "chat" in client.get("/presets").json()
    assert client.get("/kbs").json()[0]["kb"] == "pharma"
    assert "<title>babelrag</title>" in client.get("/").text
    assert "/search" in client.get("/openapi.json").json()["paths"]


def test_search_and_its_trace(client: TestClient) -> None:
    found = client.post("/search", json={"kb": "pharma", "question": "Var köper jag receptfria läkemedel?",
                                         "country": "SE", "settings": {"k": 2}}).json()
    assert [e["id"] for e in found["evidence"]][0] == "d0" and found["passed"] == 2
    assert {s["stage"] for s in found["trace"]["steps"]} >= {"detect", "plan", "retrieve"}


@pytest.mark.parametrize("body, status", [
    ({"kb": "../etc", "question": "x"}, 422),
    ({"kb": "pharma", "question": ""}, 422),
    ({"kb": "pharma", "question": "x", "settings": {"llm": "/tmp/evil.gguf"}}, 422),
    ({"kb": "pharma", "question": "x", "settings": {"rerank": "cross-encoder:/etc"}}, 422),
    ({"kb": "pharma", "question": "x", "preset": "nope"}, 400),
    ({"kb": "pharma", "question": "x", "settings": {"k": 0}}, 400),
    ({"kb": "missing", "question": "x"}, 404),
    ({"kb": "pharma", "question": "x", "extra": 1}, 422),
])
def test_bad_requests_get_clear_4xx(client: TestClient, body: dict, status: int) -> None:
    response = client.post("/search", json=body)
    assert response.status_code == status and response.json()["detail"]


def test_writes_need_the_key_and_are_limited(client: TestClient) -> None:
    doc = [{"id": "w1", "text": "Vårdcentralen har öppet vardagar.", "lang": "sv", "country": "SE"}]
    assert client.post("/kbs/pharma/documents", json=doc).status_code == 401
    assert client.post("/kbs/pharma/documents", json=doc, headers={"X-API-Key": "wrong"}).status_code == 401
    added = client.post("/kbs/pharma/documents", json=doc, headers={"X-API-Key": KEY})
    assert added.status_code == 200 and added.json()["documents"] == 1
    bad = client.post("/kbs/pharma/documents", json=[{"id": "x", "text": ""}], headers={"X-API-Key": KEY})
    assert bad.status_code == 400 and "request:1: field 'text'" in bad.json()["detail"]
    big = client.post("/kbs/pharma/documents", content=b"[" + b" " * (70 << 10) + b"]",
                      headers={"X-API-Key": KEY, "Content-Type": "application/json"})
    assert big.status_code == 413
    assert client.delete("/kbs/pharma/documents/w1", headers={"X-API-Key": KEY}).json()["passages"] == 1
    assert client.delete("/kbs/pharma/documents/w1", headers={"X-API-Key": KEY}).status_code == 404
    assert client.get("/kbs").json()[0]["documents"] == len(DOCS)


def test_no_key_configured_means_no_writes(store: str, tmp_path: Path) -> None:
    with TestClient(create_app(Service(store, tmp_path, frozenset())), base_url="http://localhost") as open_client:
        assert open_client.post("/kbs/other/documents", json=DOCS[:1], headers={"X-API-Key": "x"}).status_code == 403


def test_gate_refuses_when_full() -> None:
    gate, entered, release = Gate(slots=1, queue=0), threading.Event(), threading.Event()

    def hold() -> None:
        with gate.enter():
            entered.set()
            release.wait(5)

    worker = threading.Thread(target=hold)
    worker.start()
    entered.wait(5)
    with pytest.raises(Busy):
        with gate.enter():
            pass
    release.set()
    worker.join()
    with gate.enter():
        pass


def test_runs_and_their_reports(client: TestClient, store: str) -> None:
    from babelrag.config import preset_config
    from babelrag.evaluate.golden import GoldenQuestion
    from babelrag.evaluate.runs import run_config

    import shutil

    run_dir = client.runs / "eval-demo"
    golden = [GoldenQuestion(id="q", question="receptfria läkemedel", lang="sv", kb="SE", index="pharma",
                             country="SE", gold_pages=("d0",))]
    copy = Path(store).parent / "copy"  # the service owns 'pharma': evaluate on a copy of the store
    shutil.copytree(store, copy, ignore=shutil.ignore_patterns(".lock"), dirs_exist_ok=True)
    run_config("vector", preset_config("vector"), golden, run_dir, str(copy))
    assert client.get("/runs").json() == [{"id": "eval-demo", "complete": True}]
    assert "const DATA = {" in client.get("/runs/eval-demo/report").text
    assert client.get("/runs/..%2F..%2Fetc/report").status_code == 404


scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=30)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=12)
search_like = st.fixed_dictionaries({"kb": st.sampled_from(["pharma", "missing", "", "a/b"]),
                                     "question": st.text(max_size=80)},
                                    optional={"lang": st.text(max_size=4), "country": st.text(max_size=6),
                                              "preset": st.sampled_from(["default", "keyword", "chat-rrf", "x+y"]),
                                              "settings": st.dictionaries(st.sampled_from(
                                                  ["k", "mode", "threshold", "langs", "merge", "llm", "candidates"]),
                                                  json_values, max_size=3)})


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.one_of(search_like, json_values))
def test_fuzz_search_never_5xx(client: TestClient, body: object) -> None:
    assert client.post("/search", json=body).status_code < 500


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=json_values, kb=st.sampled_from(["fuzz", "pharma", "-bad", "x" * 80]), record=st.text(max_size=20))
def test_fuzz_writes_and_ask_never_5xx(client: TestClient, body: object, kb: str, record: str) -> None:
    headers = {"X-API-Key": KEY}
    assert client.post(f"/kbs/{kb}/documents", json=body, headers=headers).status_code < 500
    assert client.delete(f"/kbs/{kb}/documents/{quote(record or 'r', safe='')}", headers=headers).status_code < 500
    if not (isinstance(body, dict) and body.get("kb") == "pharma" and body.get("question")):  # no model calls
        assert client.post("/ask", json=body).status_code < 500


@pytest.mark.slow
def test_soak_search_with_concurrent_ingest(tmp_path: Path) -> None:
    source = tmp_path / "docs.jsonl"
    source.write_text("\n".join(json.dumps(d, ensure_ascii=False) for d in DOCS), encoding="utf-8")
    index_sources("soak", [str(source)], str(tmp_path / "store"))
    service = Service(str(tmp_path / "store"), tmp_path, frozenset({KEY}), rate_limit=0)  # one client, 2,000 asks
    questions = ["receptfria läkemedel", "pharmacies", "leki bez recepty", "medicines", "Sverige", "Polska"]
    statuses: list[int] = []
    with ThreadedServer(create_app(service)) as base, httpx.Client(base_url=base, timeout=60) as http:
        def search(i: int) -> int:
            return http.post("/search", json={"kb": "soak", "question": questions[i % len(questions)]}).status_code

        def ingest(batch: int) -> int:
            docs = [{"id": f"new-{batch}-{j}", "text": f"Nytt dokument {batch} nummer {j} om apotek.", "lang": "sv",
                     "country": "SE"} for j in range(5)]
            return http.post("/kbs/soak/documents", json=docs, headers={"X-API-Key": KEY}).status_code

        with ThreadPoolExecutor(16) as pool:
            writes = [pool.submit(ingest, b) for b in range(20)]
            statuses = list(pool.map(search, range(2000)))
            write_statuses = [w.result() for w in writes]
        assert all(s == 200 for s in statuses), {s: statuses.count(s) for s in set(statuses)}
        assert write_statuses == [200] * 20
        kb = http.get("/kbs").json()[0]
        assert kb["documents"] == kb["passages"] == len(DOCS) + 100
    stored = service.kb("soak").collection.scroll()
    assert len({p.id for p in stored}) == len(stored) == len(DOCS) + 100  # nothing lost, nothing doubled
    service.close()


@pytest.mark.slow
def test_restart_mid_ingest_leaves_a_consistent_index(tmp_path: Path) -> None:
    source = tmp_path / "docs.jsonl"
    source.write_text("\n".join(json.dumps(d, ensure_ascii=False) for d in DOCS), encoding="utf-8")
    store = str(tmp_path / "store")
    index_sources("restart", [str(source)], store)
    env = dict(os.environ, BABELRAG_API_KEY=KEY, BABELRAG_PROGRESS="0")

    def start() -> tuple[subprocess.Popen, str]:
        port = free_port()
        process = subprocess.Popen([sys.executable, "-m", "babelrag", "serve", "--store", store, "--port", str(port),
                                    "--runs", str(tmp_path)], env=env, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    return process, base
            except httpx.TransportError:
                time.sleep(0.1)
        process.kill()
        pytest.fail("server did not start")

    big = [{"id": f"bulk-{i}", "text": f"Dokument {i}: apoteket har öppet i dag och i morgon, nummer {i}.",
            "lang": "sv", "country": "SE"} for i in range(1000)]
    process, base = start()

    answered: list[int] = []

    def send() -> None:
        try:
            answered.append(httpx.post(f"{base}/kbs/restart/documents", json=big, headers={"X-API-Key": KEY},
                                       timeout=120).status_code)
        except httpx.TransportError:  # the server dies under it: that is the point
            pass

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    journal = Path(store) / "restart" / "ingest.journal.json"
    for _ in range(600):  # kill it once the write has begun (its undo journal is on disk) …
        if journal.exists():
            break
        time.sleep(0.05)
    assert journal.exists(), "the write never started"
    time.sleep(0.5)  # … and a few of its batches are in: 1,000 documents take seconds more to embed
    process.send_signal(signal.SIGKILL)
    process.wait()
    sender.join(10)
    assert not answered, "the write finished before the kill: the test proved nothing"
    process, base = start()
    try:
        kb = httpx.get(f"{base}/kbs", timeout=30).json()[0]  # opening it rolled the killed write back
        assert kb["documents"] == kb["passages"] == len(DOCS)  # exactly as before the request
        stored = httpx.post(f"{base}/search", json={"kb": "restart", "question": "apoteket",
                                                    "settings": {"k": 100, "candidates": 200}}, timeout=60)
        assert stored.status_code == 200
        ids = [e["id"] for e in stored.json()["evidence"]]
        assert sorted(ids) == sorted(d["id"] for d in DOCS)  # none of the killed write's documents
        done = httpx.post(f"{base}/kbs/restart/documents", json=big, headers={"X-API-Key": KEY}, timeout=300)
        assert done.status_code == 200  # the same ingest again completes and replaces, never doubles
        kb = httpx.get(f"{base}/kbs", timeout=30).json()[0]
        assert kb["documents"] == kb["passages"] == len(DOCS) + len(big)
    finally:
        process.terminate()
        process.wait(10)


def test_the_request_deadline_bounds_a_looping_strategys_model_seconds() -> None:
    from babelrag.server.schemas import SearchBody

    bounded = SearchBody(kb="kb", question="?", preset="coral").config("qwen2.5-coder-0.5b", None, seconds=10.0)
    assert bounded.coral.max_seconds == pytest.approx(8.0)  # 0.8 of the deadline, below the 300 s default
    assert SearchBody(kb="kb", question="?", preset="coral").config(None, None).coral.max_seconds == 300.0
