"""One conformance suite for every store adapter: embedded Edge, qdrant-client ``:memory:`` (the same
client code a cluster uses) and, when ``QDRANT_URL`` is set, a real Qdrant server."""
from __future__ import annotations

import math
import os
import uuid
from pathlib import Path

import numpy as np
import pytest

from babelrag.errors import KBNotFound, StoreError
from babelrag.retrieve import bm25
from babelrag.store.base import Store, open_store
from babelrag.store.schema import DENSE, SPARSE, ArmQuery, CollectionSpec, Match, StoredPoint, Where, where_for
from babelrag.types import Passage, PassageFilter

DIM = 16
ROWS = [  # id, lang, country, scope, terms
    ("se-sv-1", "sv", "SE", "local", ["stockholm", "huvudstad"]),
    ("se-en-1", "en", "SE", "local", ["stockholm", "capital"]),
    ("pl-pl-1", "pl", "PL", "local", ["warszawa", "stolica"]),
    ("pl-en-1", "en", "PL", "local", ["warsaw", "capital", "capital"]),
    ("gl-en-1", "en", None, "global", ["europe", "capital"]),
    ("us-en-1", "en", "US", "local", ["washington", "capital"]),
]


def _points() -> list[StoredPoint]:
    rng = np.random.default_rng(7)
    points = []
    for pid, lang, country, scope, terms in ROWS:
        vector = rng.normal(size=DIM).astype(np.float32)
        passage = Passage(pid, " ".join(terms), pid.rsplit("-", 1)[0], lang, country=country, scope=scope,
                          record_id=pid)
        points.append(StoredPoint(passage, vector / np.linalg.norm(vector), bm25.document_vector(terms, 2.0)))
    return points


def _stores() -> list:
    params = ["edge", "memory"]
    if os.environ.get("QDRANT_URL"):
        params.append("server")
    return params


@pytest.fixture(params=_stores())
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    location = {"edge": str(tmp_path / "store"), "memory": ":memory:",
                "server": os.environ.get("QDRANT_URL", "")}[request.param]
    store = open_store(location)
    yield store
    if request.param == "server":
        for name in store.list():
            if name.startswith("conformance-"):
                store.drop(name)


@pytest.fixture
def kb_name(store: Store) -> str:
    return f"conformance-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def collection(store: Store, kb_name: str):
    handle = store.create(kb_name, CollectionSpec(dim=DIM), {"kb": kb_name, "note": "ünïcode ✓"})
    handle.upsert(_points())
    yield handle
    handle.close()


def ids(results) -> list[str]:
    return [s.passage.id for s in results]


def test_lifecycle_and_manifest(store: Store, kb_name: str, collection) -> None:
    assert store.exists(kb_name) and kb_name in store.list()
    assert collection.read_manifest() == {"kb": kb_name, "note": "ünïcode ✓"}
    collection.write_manifest({"kb": kb_name, "v": 2})
    collection.close()
    reopened = store.open(kb_name)
    assert reopened.read_manifest() == {"kb": kb_name, "v": 2} and reopened.count() == len(ROWS)
    reopened.close()
    with pytest.raises(StoreError, match="already exists"):
        store.create(kb_name, CollectionSpec(dim=DIM), {})
    store.drop(kb_name)
    assert not store.exists(kb_name)
    with pytest.raises(KBNotFound):
        store.open(kb_name)


def test_dense_arm_is_exact_cosine_order(collection) -> None:
    points = _points()
    query = points[0].dense * 0.6 + points[3].dense * 0.4
    (results,) = collection.query([ArmQuery(DENSE, dense=query)], None, 10)
    expected = sorted(points, key=lambda p: -float(p.dense @ query))
    assert ids(results) == [p.passage.id for p in expected]
    assert math.isclose(results[0].score, float(expected[0].dense @ query), rel_tol=1e-4)
    assert results[0].terms is None and results[0].passage == expected[0].passage


def test_vectors_are_the_stored_ones_for_just_the_passages_asked(collection) -> None:
    """Re-scoring's cosines are products with them: they must score as the engine does."""
    points = {p.passage.id: p for p in _points()}
    query = points["pl-en-1"].dense * 0.3 + points["us-en-1"].dense * 0.7
    asked = ["se-sv-1", "gl-en-1", "pl-pl-1", "no-such-passage", "se-sv-1"]
    vectors = collection.vectors(asked)
    assert set(vectors) == {"se-sv-1", "gl-en-1", "pl-pl-1"}
    (engine,) = collection.query([ArmQuery(DENSE, dense=query)], None, 10)
    scores = {hit.passage.id: hit.score for hit in engine}
    for pid, vector in vectors.items():
        assert vector.dtype == np.float32 and vector.shape == points[pid].dense.shape
        assert math.isclose(float(vector @ query), scores[pid], rel_tol=1e-4, abs_tol=1e-6)
    assert collection.vectors([]) == {}


def test_an_arm_asked_for_terms_returns_each_hits_keyword_terms(collection) -> None:
    points = {p.passage.id: p for p in _points()}
    arms = [ArmQuery(SPARSE, sparse=bm25.query_vector(["capital"]), with_terms=True),
            ArmQuery(DENSE, dense=points["se-sv-1"].dense)]
    keyword, dense = collection.query(arms, None, 10)
    assert keyword and all(sorted(h.terms) == sorted(points[h.passage.id].sparse.indices) for h in keyword)
    assert all(h.terms is None for h in dense) and ids(dense)[0] == "se-sv-1"
    assert all(h.passage == points[h.passage.id].passage for h in [*keyword, *dense])


def test_sparse_arm_applies_engine_idf(collection) -> None:
    (results,) = collection.query([ArmQuery(SPARSE, sparse=bm25.query_vector(["stockholm"]))], None, 10)
    assert set(ids(results)) == {"se-sv-1", "se-en-1"}
    n, df = len(ROWS), 2
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    weight = 1 * (bm25.K1 + 1) / (1 + bm25.K1)  # tf=1 at average length 2
    assert math.isclose(results[0].score, idf * weight, rel_tol=1e-4)


def test_country_filter_is_country_plus_global(collection) -> None:
    where = where_for(PassageFilter(country="SE"))
    (results,) = collection.query([ArmQuery(SPARSE, sparse=bm25.query_vector(["capital"]))], where, 10)
    assert set(ids(results)) == {"se-en-1", "gl-en-1"}
    both = where_for(PassageFilter(country="PL", langs=("en",)))
    (results,) = collection.query([ArmQuery(SPARSE, sparse=bm25.query_vector(["capital"]))], both, 10)
    assert set(ids(results)) == {"pl-en-1", "gl-en-1"}
    assert collection.count(where_for(PassageFilter(langs=("sv", "pl")))) == 2


def test_batch_of_arms_in_one_call(collection) -> None:
    points = _points()
    dense, sparse = collection.query([ArmQuery(DENSE, dense=points[2].dense),
                                      ArmQuery(SPARSE, sparse=bm25.query_vector(["warszawa"]))], None, 3)
    assert ids(dense)[0] == "pl-pl-1" and ids(sparse) == ["pl-pl-1"]
    assert not dense.complete(3) and sparse.complete(3)  # cut at the limit / everything the keyword arm scores


def test_upsert_replaces_and_delete_respects_kept_ids(collection) -> None:
    points = _points()
    changed = StoredPoint(Passage("se-sv-1", "ny text", "se-sv", "sv", country="SE", record_id="se-sv-1"),
                          points[0].dense, points[0].sparse)
    collection.upsert([changed])
    assert collection.count() == len(ROWS)
    assert [p.text for p in collection.scroll(Where(must=(Match("record_id", ("se-sv-1",)),)))] == ["ny text"]
    removed = collection.delete(Where(must=(Match("lang", ("en",)),), must_not_ids=(points[1].point_id,)))
    assert removed == 3 and collection.count() == 3
    assert collection.facet("lang") == {"sv": 1, "pl": 1, "en": 1}
    assert collection.facet("country") == {"SE": 2, "PL": 1}


def test_a_search_sees_every_write_made_before_it(collection) -> None:
    """Searches may keep decoded passages and terms between calls (Edge does); a write in between must show."""
    points = _points()
    arms = [ArmQuery(DENSE, dense=points[0].dense), ArmQuery(SPARSE, sparse=bm25.query_vector(["stockholm"]),
                                                              with_terms=True)]
    dense, keyword = collection.query(arms, None, 10)
    assert dense[0].passage.text == "stockholm huvudstad"
    assert sorted(next(h for h in keyword if h.passage.id == "se-sv-1").terms) == sorted(points[0].sparse.indices)
    changed = StoredPoint(Passage("se-sv-1", "stockholm ny text", "se-sv", "sv", country="SE", record_id="se-sv-1"),
                          points[0].dense, bm25.document_vector(["stockholm", "ny", "text"], 2.0))
    collection.upsert([changed])
    dense, keyword = collection.query(arms, None, 10)
    assert dense[0].passage == changed.passage
    assert sorted(next(h for h in keyword if h.passage.id == "se-sv-1").terms) == sorted(changed.sparse.indices)
    collection.forget_passages()  # what a cold timing does: the same answers, read afresh
    assert [[(h.passage, h.score, h.terms) for h in arm] for arm in collection.query(arms, None, 10)] == [
        [(h.passage, h.score, h.terms) for h in arm] for arm in (dense, keyword)]
    assert math.isclose(float(collection.vectors(["se-sv-1"])["se-sv-1"] @ points[1].dense),
                        float(points[0].dense @ points[1].dense), rel_tol=1e-4, abs_tol=1e-6)
    moved = StoredPoint(changed.passage, points[1].dense, changed.sparse)  # the same passage, another vector
    collection.upsert([moved])
    assert math.isclose(float(collection.vectors(["se-sv-1"])["se-sv-1"] @ points[1].dense),
                        float(points[1].dense @ points[1].dense), rel_tol=1e-4, abs_tol=1e-6)


def test_adapters_agree_on_results(tmp_path: Path) -> None:
    """Same points, same queries: the embedded engine and the client agree on ids and scores."""
    query_vector = _points()[4].dense
    arms = [ArmQuery(DENSE, dense=query_vector), ArmQuery(SPARSE, sparse=bm25.query_vector(["capital", "europe"]))]
    answers = []
    for location in (str(tmp_path / "edge"), ":memory:"):
        handle = open_store(location).create("same", CollectionSpec(dim=DIM), {})
        handle.upsert(_points())
        answers.append([[(s.passage.id, round(s.score, 4)) for s in arm] for arm in
                        handle.query(arms, where_for(PassageFilter(country="US")), 10)])
        handle.close()
    assert answers[0] == answers[1]
