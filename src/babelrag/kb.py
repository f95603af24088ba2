"""A knowledge base: a store collection plus the manifest and embedder that built it.

Opening checks the manifest against this install (refusing a mismatch) and rebuilds the
embedder from the manifest's spec, so a query can never be embedded by another model.
"""
from __future__ import annotations

import os
import threading
from collections import OrderedDict
from functools import cache
from typing import Any

import numpy as np

from babelrag.errors import IndexMismatch, KBNotFound, StoreError
from babelrag.json_store import digest
from babelrag.models.embed import Embedder, build_embedder, embedder_from_manifest
from babelrag.models.embed_cache import CachedEmbedder
from babelrag.relevance.model import default_model, describe
from babelrag.paths import cache_dir, default_store
from babelrag.store import manifest as manifests
from babelrag.store import journal
from babelrag.store.base import Collection, Store, open_store
from babelrag.store.schema import GLOBAL, CollectionSpec, Match, Where, pages, spec_of


def embedder_for(spec: dict[str, Any] | str, trusted: bool = True) -> Embedder:
    """Process-wide embedders, behind the persistent cache unless ``BABELRAG_EMBED_CACHE=0``. ``trusted``:
    the spec is this installation's own (an index command); a KB's manifest is not (``embedder_from_manifest``)."""
    return _embedder(tuple(sorted(({"name": spec} if isinstance(spec, str) else spec).items())), trusted)


@cache
def _embedder(spec: tuple[tuple[str, Any], ...], trusted: bool) -> Embedder:
    inner = build_embedder(dict(spec)) if trusted else embedder_from_manifest(dict(spec))
    if os.environ.get("BABELRAG_EMBED_CACHE", "1") == "0":
        return inner
    return CachedEmbedder(inner, cache_dir() / "embeddings.sqlite")


class KnowledgeBase:
    """``query_embedder`` embeds questions and paths: the persistent-cached embedder by default, the bare
    model when timing must measure the work a cold question does (``cached_queries=False``)."""

    def __init__(self, name: str, store: Store, collection: Collection, manifest: dict[str, Any],
                 embedder: Embedder, query_embedder: Embedder | None = None):
        self.name, self.store, self.collection, self.manifest, self.embedder = \
            name, store, collection, manifest, embedder
        self.query_embedder = query_embedder or embedder
        self._query_vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._memo_lock = threading.Lock()

    def query_vectors(self, texts: list[str]) -> list[np.ndarray]:
        """Query embeddings, remembered (retrieval and dense re-scoring of a path share one); the
        texts not seen yet are embedded in one batch. Safe to call from the path threads."""
        with self._memo_lock:
            found = {t: self._query_vectors[t] for t in texts if t in self._query_vectors}
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing:
            found.update(zip(missing, self.query_embedder.embed(missing, "query")))
            with self._memo_lock:
                self._query_vectors.update((t, found[t]) for t in missing)
                while len(self._query_vectors) > 4096:
                    self._query_vectors.popitem(last=False)
        return [found[t] for t in texts]

    def query_vector(self, text: str) -> np.ndarray:
        return self.query_vectors([text])[0]

    def forget_query_vectors(self) -> None:
        """Drop remembered query vectors (timed runs measure each question cold)."""
        with self._memo_lock:
            self._query_vectors.clear()

    def identity(self) -> dict[str, Any]:
        """What tells this index's results apart: components, creation, last update, size, and the
        relevance model and profile ``babelrag tune`` stored with it."""
        m = self.manifest
        return {"kb": self.name, "components": m.get("components"), "created_at": m.get("created_at"),
                "updated_at": m.get("updated_at"), "passages": m.get("passages"),
                "relevance": digest(m.get("relevance")), "profile": digest(m.get("profile"))}

    @classmethod
    def open(cls, name: str, store: Store | str | None = None, *, cached_queries: bool = True) -> KnowledgeBase:
        store = resolve_store(store)
        collection = store.open(name)
        unfinished = journal.pending(collection)
        if unfinished is not None and unfinished.get("created"):  # its first ingest never finished
            collection.close()
            store.drop(name)
            raise KBNotFound(name, store.location, store.list())
        try:
            if unfinished is not None:  # a write killed midway: put the KB back as it was before it
                journal.undo(collection, unfinished)
            manifest = collection.read_manifest()
            recorded = manifest.get("components", {}).get("embedder")  # everything else is checked before the
            current = manifests.components(recorded, manifests.engine_of(store.location))  # embedder is built
            if found := manifests.differences(manifest, current):
                raise IndexMismatch(name, found)
            embedder = embedder_for(manifest["embedder"]["spec"], trusted=False)
            if found := manifests.differences(manifest, {"embedder": embedder.fingerprint()}):
                raise IndexMismatch(name, found)
        except BaseException:
            collection.close()
            raise
        query_embedder = embedder if cached_queries else getattr(embedder, "inner", embedder)
        kb = cls(name, store, collection, manifest, embedder, query_embedder)
        if unfinished is not None:
            kb.refresh_manifest()
        return kb

    @classmethod
    def create(cls, name: str, store: Store | str | None, embedder: Embedder, *, bm25: dict[str, float],
               chunking: dict[str, Any], detect_languages: list[str],
               spec: CollectionSpec | None = None) -> KnowledgeBase:
        """``bm25`` fixes the KB's term weighting (k1, b, avgdl) for its lifetime."""
        store = resolve_store(store)
        spec = spec or CollectionSpec(dim=embedder.dim)
        manifest = manifests.new_manifest(
            name, embedder_spec=embedder.spec(), embedder_fingerprint=embedder.fingerprint(), dim=embedder.dim,
            engine=manifests.engine_of(store.location),
            collection={"hnsw_m": spec.hnsw_m, "hnsw_ef_construct": spec.hnsw_ef_construct,
                        "full_scan_threshold_kb": spec.full_scan_threshold_kb, "hnsw_ef": spec.hnsw_ef},
            bm25=bm25, chunking=chunking, detect_languages=detect_languages)
        manifest["relevance"] = describe(default_model())  # `rerank: learned` until `babelrag tune` fits its own
        return cls(name, store, store.create(name, spec, manifest), manifest, embedder)

    def refresh_manifest(self, **updates: Any) -> None:
        """Recount passages, documents and the language mix per country and scope (the KB-language sets)."""
        collection = self.collection
        languages: dict[str, Any] = {"all": collection.facet("lang"),
                                     "global": collection.facet("lang", Where(must=(Match("scope", (GLOBAL,)),))),
                                     "countries": {}}
        for country in collection.facet("country"):
            languages["countries"][country] = collection.facet("lang", Where(must=(Match("country", (country,)),)))
        self.manifest.update(updates, passages=collection.count(), documents=collection.count(Where(must=(Match("chunk", (0,)),))),
                             languages=languages, updated_at=manifests.now())
        collection.write_manifest(self.manifest)

    def close(self) -> None:
        self.collection.close()

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def copy_kb(source: KnowledgeBase, store: Store | str, name: str | None = None, *,
            batch: int = 512) -> KnowledgeBase:
    """The same KB in another store (a laptop's embedded index onto a Qdrant server, or back): points and
    vectors as stored, so nothing is re-embedded and answers match. Read and written a page at a time.
    The copy carries a "created" undo journal until its last point is in, so an interrupted copy is
    dropped when anything opens it (and a new copy may replace it); a complete KB of that name is refused."""
    store, name = resolve_store(store), name or source.name
    if store.exists(name):
        _drop_unfinished(store, name)
    manifest = dict(source.manifest, kb=name,
                    components=dict(source.manifest["components"], engine=manifests.engine_of(store.location)))
    collection = store.create(name, spec_of(manifest), manifest)  # refuses a KB that exists by now
    try:
        journal.begin(collection, [], [], created=True)
        copied = 0
        for page in pages(source.collection.points(), batch):
            collection.upsert(page)
            copied += len(page)
        collection.optimize()
        if collection.count() != copied or copied != source.collection.count():
            raise StoreError(f"copy of {source.name!r} to {store.location} holds {collection.count()} points "
                             f"of {source.collection.count()}")
        journal.end(collection)
    except BaseException:
        collection.close()
        store.drop(name)
        raise
    collection.close()
    return KnowledgeBase.open(name, store)


def _drop_unfinished(store: Store, name: str) -> None:
    collection = store.open(name)
    try:
        unfinished = journal.pending(collection)
    finally:
        collection.close()
    if unfinished is None or not unfinished.get("created"):
        raise FileExistsError(f"{name!r} already exists in {store.location}; drop it first or pick another name")
    store.drop(name)  # a copy (or first ingest) that never finished: never served, safe to replace


def resolve_store(store: Store | str | None) -> Store:
    if store is None or isinstance(store, str):
        return open_store(store or default_store())
    return store
