"""Hardening, round two, at the HTTP surface: every input decoded or refused naming the field (never
echoed), keys checked before a body is read, budgets per route, the API docs behind the read key, a
broken KB or run as one public refusal, and searches during a first ingest told "not ready"."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from babelrag.ingest.pipeline import index_sources
from babelrag.server.app import create_app
from babelrag.server.service import Service

KEY, READER = "inputs-key-0123456789", "inputs-reader-0123456789"
DOCS = [{"id": "d0", "text": "Apoteket säljer receptfria läkemedel i hela Sverige.", "lang": "sv", "country": "SE"},
        {"id": "d1", "text": "Swedish pharmacies sell over-the-counter medicines.", "lang": "en", "country": "SE"}]
WRITE = {"X-API-Key": KEY, "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("inputs")
    (folder / "docs.jsonl").write_text("\n".join(json.dumps(d, ensure_ascii=False) for d in DOCS), encoding="utf-8")
    for name in ("pharma", "broken"):
        index_sources(name, [str(folder / "docs.jsonl")], str(folder / "store"))
    manifest = Path(folder / "store" / "broken" / "manifest.json")
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "components": "garbled"}), encoding="utf-8")
    return str(folder / "store")


@pytest.fixture(scope="module")
def client(store: str, tmp_path_factory: pytest.TempPathFactory):
    runs = tmp_path_factory.mktemp("runs")
    (runs / "garbage").mkdir()
    (runs / "garbage" / "metrics.json").write_text("{not json", encoding="utf-8")
    service = Service(store, runs, frozenset({KEY}), read_keys=frozenset({READER}), rate_limit=0)
    with TestClient(create_app(service), base_url="http://127.0.0.1", headers={"X-API-Key": READER}) as test_client:
        test_client.service = service
        yield test_client


def raw(client: TestClient, path: str, body: str, headers: dict | None = None) -> tuple[int, str]:
    response = client.post(path, content=body.encode("utf-8", "surrogatepass"),
                           headers=headers or {"Content-Type": "application/json"})
    return response.status_code, response.text


@pytest.mark.parametrize("body, field", [
    ('{"kb": "pharma", "question": "\\ud800"}', "question"),
    ('{"kb": "pharma", "question": "x", "lang": "\\udfff"}', "lang"),
    ('{"kb": "pharma", "question": "x", "settings": {"langs": ["\\ud800"]}}', "settings.langs.0"),
    ('{"kb": "pharma", "question": "x", "settings": {"keyword_weight": 1e999}}', "settings.keyword_weight"),
    ('{"kb": "pharma", "question": "x", "settings": {"threshold": NaN}}', "settings.threshold"),
    ('{"kb": "pharma", "question": "x", "settings": {"threshold": -Infinity}}', "settings.threshold"),
    ('{"kb": "pharma", "question": "x", "settings": {"k": ' + "9" * 5000 + '}}', "too many digits"),
    ('{"kb": "pharma", "question": "x", "junk": ' + "[" * 40 + "]" * 40 + '}', "nested too deeply"),
])
def test_undecodable_values_are_refused_naming_the_field(client: TestClient, body: str, field: str) -> None:
    for path in ("/search", "/ask"):
        status, text = raw(client, path, body)
        assert status == 400 and field in text, (path, status, text[:300])
        assert "sys." not in text and "9999" not in text


@pytest.mark.parametrize("metadata", ['{"x": "\\ud800"}', '{"x": 1e999}', '{"\\udc00": 1}', '{"x": [Infinity]}'])
def test_undecodable_metadata_is_refused_and_nothing_is_written(client: TestClient, metadata: str) -> None:
    status, text = raw(client, "/kbs/pharma/documents", f'[{{"id": "m", "text": "t", "metadata": {metadata}}}]', WRITE)
    assert status == 400 and "metadata" in text
    status, text = raw(client, "/kbs/pharma/documents", '[{"id": "m", "text": "t", "extra": "\\ud800"}]', WRITE)
    assert status == 400 and "extra" in text
    assert next(k for k in client.get("/kbs").json() if k["kb"] == "pharma")["documents"] == len(DOCS)


@pytest.mark.parametrize("settings", [{"k": "1000"}, {"candidates": "1000"}, {"k": 100.0}, {"k": True},
                                      {"threshold": "0.5"}, {"delta": {"max_chars": "900"}}])
def test_numbers_must_be_json_numbers_of_their_kind(client: TestClient, settings: dict) -> None:
    response = client.post("/search", json={"kb": "pharma", "question": "x", "settings": settings})
    assert response.status_code == 422 and next(iter(settings)) in response.text


def test_refusals_name_a_clients_own_field_names_cut_short(client: TestClient) -> None:
    key = "K" * 500
    status, text = raw(client, "/kbs/pharma/documents", f'[{{"id": "k", "text": "t", "metadata": {{"{key}": NaN}}}}]',
                       WRITE)
    assert status == 400 and "K" * 64 in text and "K" * 65 not in text


def test_validation_errors_never_echo_the_input(client: TestClient) -> None:
    secret = "ECHO-" + "x" * 500
    response = client.post("/search", json={"kb": "pharma", "question": "", "country": secret, "junk": [secret],
                                            "settings": {secret: 1}})
    assert response.status_code == 422 and "ECHO-" + "x" * 60 not in response.text
    assert all(set(item) == {"loc", "msg", "type"} for item in response.json()["detail"])


def test_country_codes_are_iso_3166(client: TestClient) -> None:
    assert client.post("/search", json={"kb": "pharma", "question": "x", "country": "ZZ\n<script>"}).status_code == 422
    assert client.post("/search", json={"kb": "pharma", "question": "apotek", "country": "se"}).status_code == 200
    status, text = raw(client, "/kbs/pharma/documents", '[{"id": "c", "text": "t", "country": "ZZ\\n<script>"}]', WRITE)
    assert status == 400 and "country" in text and "script" not in text


def test_keys_are_checked_before_the_body_is_read(client: TestClient) -> None:
    """An unauthenticated client's body is never parsed: invalid JSON still gets the 401."""
    for path in ("/search", "/ask", "/v1/chat/completions"):
        assert raw(client, path, "{not json", {"Content-Type": "application/json", "X-API-Key": "wrong"})[0] == 401
    assert raw(client, "/kbs/pharma/documents", "{not json", {"Content-Type": "application/json"})[0] == 401


def test_bodies_are_bounded_per_route(client: TestClient) -> None:
    junk = '{"kb": "pharma", "question": "x", "junk": [' + ",".join(["0"] * 40_000) + "]}"
    assert raw(client, "/search", junk)[0] == 413  # over the search budget by its size
    many = '{"kb": "pharma", "question": "x", "junk": [' + ",".join(["[]"] * 5_000) + "]}"
    assert raw(client, "/search", many)[0] == 413  # small, but too many JSON values to parse


def test_docs_need_the_read_key(client: TestClient) -> None:
    for path in ("/openapi.json", "/docs", "/redoc"):
        assert client.get(path, headers={"X-API-Key": "wrong"}).status_code == 401
        assert client.get(path).status_code == 200
    assert "/search" in client.get("/openapi.json").json()["paths"]


def test_a_broken_kb_is_one_broken_kb(client: TestClient) -> None:
    listed = {k["kb"]: k for k in client.get("/kbs").json()}
    assert listed["pharma"]["documents"] == len(DOCS)
    assert listed["broken"]["warning"].startswith("unreadable: ")
    assert {m["id"] for m in client.get("/v1/models").json()["data"]} >= {"pharma"}
    refused = client.post("/search", json={"kb": "broken", "question": "apotek"})
    assert refused.status_code == 503 and "garbled" not in refused.text and "store" not in refused.json()["detail"]


def test_a_damaged_run_is_refused_not_a_500(client: TestClient) -> None:
    response = client.get("/runs/garbage/report")
    assert response.status_code == 503 and "unreadable" in response.json()["detail"]


def test_an_index_mismatch_names_no_versions(store: str, tmp_path: Path) -> None:
    index_sources("old", [str(Path(store).parent / "docs.jsonl")], store)
    manifest = Path(store) / "old" / "manifest.json"
    built = json.loads(manifest.read_text())
    built["components"]["analyzer.jieba"] = "0.0.1-ancient"
    manifest.write_text(json.dumps(built), encoding="utf-8")
    with TestClient(create_app(Service(store, tmp_path, frozenset())), base_url="http://127.0.0.1") as open_client:
        refused = open_client.post("/search", json={"kb": "old", "question": "apotek"})
    assert refused.status_code == 503 and "ancient" not in refused.text and "jieba" not in refused.text


def test_searches_during_a_first_ingest_are_told_not_ready(client: TestClient) -> None:
    with client.service.writing("arriving", adding=True):  # a first ingest of 'arriving' is running
        refused = client.post("/search", json={"kb": "arriving", "question": "x"})
    assert refused.status_code == 409 and "not ready" in refused.json()["detail"]
    assert client.post("/search", json={"kb": "arriving", "question": "x"}).status_code == 404
    with client.service.writing("arriving"):  # a delete creates nothing: the KB is simply not there
        assert client.post("/search", json={"kb": "arriving", "question": "x"}).status_code == 404
