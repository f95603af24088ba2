"""A knowledge base: a store collection plus the manifest and embedder that built it.

Opening checks the manifest's shape and its versions against this install (refusing a damaged one as
``KBUnreadable``, a mismatch as ``IndexMismatch``) and rebuilds the embedder from the manifest's spec,
so a query can never be embedded by another model. Any number of ``KnowledgeBase`` objects may be open
on one KB in a process (the store shares one loaded shard and one manifest between them); writes
through any of them take turns (``collection.writing``).
"""
from __future__ import annotations

import os
import threading
import warnings
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from functools import cache
from typing import Any

import numpy as np

from babelrag import deadline
from babelrag.errors import ConfigError, IndexMismatch, KBExists, KBNotFound, KBNotReady, KBUnreadable, StoreError
from babelrag.json_store import digest
from babelrag.lang import analyzers
from babelrag.models.embed import Embedder, build_embedder, embedder_from_manifest
from babelrag.models.embed_cache import CachedEmbedder
from babelrag.relevance.model import default_model, describe
from babelrag.paths import cache_dir, default_store
from babelrag.store import manifest as manifests
from babelrag.store import journal
from babelrag.store.language_vectors import LanguageCentroids, LanguageSums
from babelrag.store.manifest import LanguageMix, Manifest
from babelrag.store.base import Collection, Store, open_store
from babelrag.store.copies import UNTRANSLATED
from babelrag.store.schema import GLOBAL, CollectionSpec, Match, StoredPoint, Where, pages, spec_of, staging_name


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

    def __init__(self, name: str, store: Store, collection: Collection, embedder: Embedder,
                 query_embedder: Embedder | None = None):
        self.name, self.store, self.collection, self.embedder = name, store, collection, embedder
        self.query_embedder = query_embedder or embedder
        self._query_vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._memo_lock = threading.Lock()
        self._pivot_copies: Collection | None = None
        self._centroids: tuple[tuple[Any, Any], LanguageCentroids] | None = None  # and the record they came from
        self._counting = threading.Lock()  # one count of an index's language sums at a time

    @property
    def manifest(self) -> Manifest:
        """The KB's manifest as last written — by any handle in this process (the store shares one copy
        between them). A fresh object: change it and ``write_manifest`` it to keep a change."""
        return Manifest.parse(self.collection.read_manifest(), self.name)

    def write_manifest(self, manifest: Manifest) -> None:
        """The one place a KB's manifest is written (its store keeps it as JSON)."""
        self.collection.write_manifest(manifest.stored())

    def update_manifest(self, **fields: Any) -> None:
        """These fields changed, the rest as stored now, in the KB's write turn: a manifest read, changed and
        written back beside a write would put back what that write changed (its counts, its language sums)."""
        with self.collection.writing():
            self.write_manifest(self.manifest.model_copy(update=fields))

    def query_vectors(self, texts: list[str]) -> list[np.ndarray]:
        """Query embeddings, remembered (retrieval and dense re-scoring of a path share one); the
        texts not seen yet are embedded in one batch. Safe to call from the path threads."""
        with self._memo_lock:
            found = {t: self._query_vectors[t] for t in texts if t in self._query_vectors}
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing:
            deadline.check("embedding the question")  # one native call no deadline can stop once started
            found.update(zip(missing, self.query_embedder.embed(missing, "query")))
            with self._memo_lock:
                self._query_vectors.update((t, found[t]) for t in missing)
                while len(self._query_vectors) > 4096:
                    self._query_vectors.popitem(last=False)
        return [found[t] for t in texts]

    def query_vector(self, text: str) -> np.ndarray:
        return self.query_vectors([text])[0]

    def forget_query_vectors(self) -> None:
        """Drop remembered query vectors, and the query analyses the keyword analyzer keeps (those of every KB in
        the process: they are the analyzer's, not this KB's), so timed runs measure each question cold."""
        with self._memo_lock:
            self._query_vectors.clear()
        analyzers.forget_queries()

    def forget_passages(self) -> None:
        """Drop the decoded passages the store keeps between searches, of the KB and of its pivot copies when
        open (timed runs measure each question cold: no question reads what another one's search decoded)."""
        self.collection.forget_passages()
        if self._pivot_copies is not None:
            self._pivot_copies.forget_passages()

    def pivot_copies(self, create: bool = False) -> Collection | None:
        """The collection of this KB's pivot-language copies (``_pivot.<kb>``, ingest/pivot_copies.py), opened
        on first use; None when none were made for this KB as it is (copies of a KB rebuilt since, or of an
        earlier KB of this name, are not its copies). ``create``: make it (empty, the KB's settings), replacing
        such leftovers."""
        name, owner = staging_name(self.name, "pivot"), self._copies_owner()
        with self._memo_lock:
            if self._pivot_copies is None and self.store.exists(name):
                found = self.store.open(name)
                if found.read_manifest().get("copies_of") == owner:
                    self._pivot_copies = found
                else:
                    found.close()
                    if create:
                        self.store.drop(name)
            if self._pivot_copies is None and create:
                manifest = {**self.manifest.model_copy(update={"kb": name, "pivot_copies": None,
                                                                "language_vectors": None}).stored(),
                            "copies_of": owner}
                self._pivot_copies = self.store.create(name, spec_of(manifest), manifest)
            return self._pivot_copies

    def _copies_owner(self) -> dict[str, Any]:
        manifest = self.manifest
        return {"created_at": manifest.created_at, "instance": manifest.instance, "embedder": self.embedder.fingerprint()}

    def drop_pivot_copies(self) -> None:
        """Delete the KB's pivot copies (the KB itself stays)."""
        name = staging_name(self.name, "pivot")
        with self._memo_lock:
            if self._pivot_copies is not None:
                self._pivot_copies.close()
                self._pivot_copies = None
            if self.store.exists(name):
                self.store.drop(name)
        if self.manifest.pivot_copies is not None:
            self.update_manifest(pivot_copies=None)

    def identity(self) -> dict[str, Any]:
        """What tells this index's results apart: components, creation, last update, size, and the
        relevance model and profile ``babelrag tune`` stored with it."""
        m = self.manifest
        return {"kb": self.name, "components": m.components, "created_at": m.created_at,
                "updated_at": m.updated_at, "passages": m.passages,
                "relevance": digest(m.relevance), "profile": digest(m.profile)}

    @classmethod
    def open(cls, name: str, store: Store | str | None = None, *, cached_queries: bool = True) -> KnowledgeBase:
        """The KB ``name``. An unfinished write found in it is rolled back — when it is a dead process's: while
        another handle in this process has the KB open the write is that handle's, still running, and a
        first ingest still running makes the KB ``KBNotReady``."""
        store = resolve_store(store)
        embedder = _checked(store.manifest(name), name, store)  # before the shard loads (that holds the GIL)
        collection = store.open(name)
        try:
            unfinished = journal.pending(collection)
            if unfinished is not None and unfinished.get("created"):
                if not collection.recovers:
                    raise KBNotReady(name)
                collection.close()  # its first ingest never finished: never served, dropped
                store.drop(name)
                raise KBNotFound(name, store.location, store.list())
            if unfinished is not None and collection.recovers:  # a write killed midway: put the KB back
                _undo(collection, unfinished, name)
        except BaseException:
            collection.close()
            raise
        query_embedder = embedder if cached_queries else getattr(embedder, "inner", embedder)
        kb = cls(name, store, collection, embedder, query_embedder)
        if unfinished is not None and collection.recovers:
            kb.refresh_manifest(recount=True)
        return kb

    @classmethod
    def create(cls, name: str, store: Store | str | None, embedder: Embedder, *, bm25: dict[str, float],
               chunking: dict[str, Any], detect_languages: list[str], spec: CollectionSpec | None = None,
               undo: dict[str, Any] | None = None) -> KnowledgeBase:
        """``bm25`` fixes the KB's term weighting (k1, b, avgdl) for its lifetime; ``undo``: the creating
        write's journal, in place before anyone can open the KB (``journal.creating``)."""
        store = resolve_store(store)
        spec = spec or CollectionSpec(dim=embedder.dim)
        manifest = manifests.new_manifest(
            name, embedder_spec=embedder.spec(), embedder_fingerprint=embedder.fingerprint(), dim=embedder.dim,
            engine=manifests.engine_of(store.location),
            collection={"hnsw_m": spec.hnsw_m, "hnsw_ef_construct": spec.hnsw_ef_construct,
                        "full_scan_threshold_kb": spec.full_scan_threshold_kb, "hnsw_ef": spec.hnsw_ef},
            bm25=bm25, chunking=chunking, detect_languages=detect_languages,
            relevance=describe(default_model()))  # `rerank: learned` until `babelrag tune` fits its own
        return cls(name, store, store.create(name, spec, manifest.stored(), undo), embedder)

    def refresh_manifest(self, change: LanguageSums | None = None, recount: bool = False) -> None:
        """Recount passages, documents and the language mix per country and scope (the KB-language sets), and
        move each language's vector sum by what the write did (``change``: added minus removed); sums that still
        disagree with the recount, or ``recount`` (after a write was undone: its change may or may not be in
        them), are counted again from the stored vectors."""
        collection = self.collection
        languages = LanguageMix(
            all=collection.facet("lang"), global_=collection.facet("lang", Where(must=(Match("scope", (GLOBAL,)),))),
            countries={country: collection.facet("lang", Where(must=(Match("country", (country,)),)))
                       for country in collection.facet("country")})
        manifest = self.manifest
        passages = collection.count()
        sums = self._language_sums(manifest.language_vectors, change, languages.all, passages, recount)
        self.write_manifest(manifest.model_copy(update={
            "passages": passages, "documents": collection.count(Where(must=(Match("chunk", (0,)),))),
            "languages": languages, "language_vectors": sums.stored(), "updated_at": manifests.now()}))

    def _language_sums(self, record: Any, change: LanguageSums | None, counts: dict[str, int], passages: int,
                       recount: bool) -> LanguageSums:
        if not counts:  # the index holds nothing (everything deleted): nothing to sum
            return LanguageSums()
        held = _readable(record, self.embedder.dim)
        moved = held.merged(change or LanguageSums()) if held is not None else None
        if moved is not None and moved.counts() == counts and not recount:
            return moved
        why = "a write undone" if recount else _why_counted(record, held)
        return self._counted(why, passages, warn=why in ("unreadable", "counts differ"), then="stored now")

    def _counted(self, why: str, passages: int, warn: bool, then: str,
                 points: Iterable[StoredPoint] | None = None) -> LanguageSums:
        """The language sums counted again from the stored vectors, said on the progress line, and as a warning
        when ``warn`` (sums that went wrong, or a search counting them in every new process): seen where progress
        lines are off. A write's planned recount (after an undo, or of an index built before the sums) is not."""
        if warn:
            warnings.warn(f"KB {self.name!r}: language centroids counted from its stored vectors ({why}); {then}",
                          RuntimeWarning, stacklevel=3)
        return LanguageSums.of_points(self.collection.points() if points is None else points, passages,
                                      f"{self.name} ({why})")

    def language_centroids(self) -> LanguageCentroids:
        """The KB's language centroids as its manifest holds them now (remembered until a write changes them).
        Sums that are missing (an index built before they were kept), unreadable, or whose counts disagree with
        the manifest's language mix (a write cut off between the two) are counted from the stored vectors once
        in this process, and stored by the KB's next write: a search never writes the KB."""
        stored = self.collection.read_manifest()
        record, counts = stored.get("language_vectors"), (stored.get("languages") or {}).get("all")
        with self._memo_lock:
            if self._centroids is not None and self._centroids[0] == (record, counts):
                return self._centroids[1]
        dim = self.embedder.dim
        sums = _readable(record, dim)
        if sums is None or sums.counts() != counts:
            with self._counting:  # searches on other threads wait here, then find them counted
                with self._memo_lock:
                    if self._centroids is not None and self._centroids[0] == (record, counts):
                        return self._centroids[1]
                sums = self._counted(_why_counted(record, sums), self.collection.count(), warn=True,
                                     then="counted again in each new process until the KB's next write",
                                     points=_until_deadline(self.collection.points(), "counting language centroids"))
        centroids = LanguageCentroids.of(sums, dim)
        with self._memo_lock:
            self._centroids = ((record, counts), centroids)
        return centroids

    def delete(self, ids: Sequence[str] = (), doc_ids: Sequence[str] = (), everything: bool = False) -> int:
        """Remove records by id (every chunk of each), pages by ``doc_id`` (every language version and chunk),
        or ``everything`` (the KB stays, empty); returns the passages removed. The manifest is recounted."""
        conditions = [Where(must=(Match(key, tuple(values[start:start + 256])),))
                      for key, values in (("record_id", list(ids)), ("doc_id", list(doc_ids)))
                      for start in range(0, len(values), 256)]
        if everything:
            conditions = [Where()]
        if not conditions:
            raise ConfigError("delete: give record ids, doc ids, or everything=True")
        with self.collection.writing():
            going = LanguageSums()  # what the delete takes out of each language's vector sum (everything: counted anew)
            seen: set[str] = set()  # a passage matched by an id and by its doc id is taken out once
            for point in () if everything else (p for where in conditions for p in self.collection.points(where)):
                if point.passage.id not in seen:
                    seen.add(point.passage.id)
                    going.add((point,), sign=-1)
            removed = sum(self.collection.delete(where) for where in conditions)
            if (copies := self.pivot_copies()) is not None:  # a deleted passage's copy goes with it
                for where in conditions:
                    copies.delete(where)
                if (record := self.manifest.pivot_copies) is not None:
                    stand_ins = sum(bool(p.metadata.get(UNTRANSLATED)) for p in copies.scroll())
                    self.write_manifest(self.manifest.model_copy(update={"pivot_copies": record.model_copy(
                        update={"copies": copies.count(), "failed": stand_ins})}))
            if removed:
                self.refresh_manifest(going)
        return removed

    def close(self) -> None:
        with self._memo_lock:
            if self._pivot_copies is not None:
                self._pivot_copies.close()
                self._pivot_copies = None
        self.collection.close()

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _readable(record: Any, dim: int) -> LanguageSums | None:
    """The language sums a manifest holds; None when it holds none or they cannot be read (counted again)."""
    try:
        return LanguageSums.parse(record, dim) if record is not None else None
    except ValueError:
        return None


def _until_deadline(points: Iterable[StoredPoint], what: str, every: int = 1024) -> Iterator[StoredPoint]:
    """The points, the request's deadline checked every ``every`` of them: a search that has to count an old
    index's centroids stops with its request (nothing is remembered; the next search counts again)."""
    for n, point in enumerate(points):
        if n % every == 0:
            deadline.check(what)
        yield point


def _why_counted(record: Any, held: LanguageSums | None) -> str:
    """Why sums are counted again, for the progress line and the warning."""
    return "not kept yet" if record is None else "unreadable" if held is None else "counts differ"


def _undo(collection: Collection, unfinished: dict[str, Any], name: str) -> None:
    try:
        journal.undo(collection, unfinished)
    except (KeyError, TypeError, ValueError) as error:  # a journal that parsed but holds garbage
        raise KBUnreadable(name, f"journal: {type(error).__name__}: {error}") from error


def _checked(stored: dict[str, Any], name: str, store: Store) -> Embedder:
    """The embedder a KB's manifest names, once the manifest has the shape babelrag writes and names this
    install's components (``KBUnreadable``, ``IndexMismatch``); one this installation cannot build (an
    unknown variant, an endpoint not allowed here) makes the KB unreadable, not the request."""
    manifest = Manifest.parse(stored, name)
    recorded = manifest.components.get("embedder")  # everything else is checked before the embedder is built
    if found := manifests.differences(manifest, manifests.components(recorded, manifests.engine_of(store.location))):
        raise IndexMismatch(name, found)
    try:
        embedder = embedder_for(manifest.embedder.spec, trusted=False)
    except (ConfigError, ValueError, KeyError, TypeError, OSError) as error:  # unreachable (StoreError) passes
        raise KBUnreadable(name, f"embedder spec: {error}") from error
    if found := manifests.differences(manifest, {"embedder": embedder.fingerprint()}):
        raise IndexMismatch(name, found)
    return embedder


def copy_kb(source: KnowledgeBase, store: Store | str, name: str | None = None, *,
            batch: int = 512) -> KnowledgeBase:
    """The same KB in another store (a laptop's embedded index onto a Qdrant server, or back): points and
    vectors as stored, so nothing is re-embedded and answers match. Read and written a page at a time.
    The copy carries a "created" undo journal until its last point is in, so an interrupted copy is
    dropped when anything opens it (and a new copy may replace it); a complete KB of that name is refused."""
    store, name = resolve_store(store), name or source.name
    if store.exists(name):
        _drop_unfinished(store, name)
    built = source.manifest
    manifest = built.model_copy(update={"kb": name, "pivot_copies": None, "components": {  # copies are not copied
        **built.components, "engine": manifests.engine_of(store.location)}}).stored()
    collection = store.create(name, spec_of(manifest), manifest, journal.creating())  # refuses one that exists by now
    try:
        copied, sums = 0, LanguageSums()  # the copy's language sums are those of the points it got
        for page in pages(source.collection.points(), batch):
            collection.upsert(page)
            sums.add(page)
            copied += len(page)
        collection.optimize()
        if collection.count() != copied or copied != source.collection.count():
            raise StoreError(f"copy of {source.name!r} to {store.location} holds {collection.count()} points "
                             f"of {source.collection.count()}")
        collection.write_manifest({**manifest, "language_vectors": sums.stored()})
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
        running = not collection.recovers  # another handle here has it open: its copy or first ingest runs
    finally:
        collection.close()
    if unfinished is None or not unfinished.get("created"):
        raise KBExists(f"knowledge base '{name}' already exists in {store.location}; drop it first "
                       f"(`babelrag delete --kb {name} --all --store ...`) or pick another name (--name)")
    if running:
        raise KBNotReady(name)
    store.drop(name)  # a copy (or first ingest) that never finished: never served, safe to replace


def drop_kb(store: Store | str | None, name: str) -> None:
    """Delete the KB ``name`` and everything kept beside it (its pivot copies)."""
    store = resolve_store(store)
    companion = staging_name(name, "pivot")
    if store.exists(companion):
        store.drop(companion)
    store.drop(name)


def resolve_store(store: Store | str | os.PathLike[str] | None) -> Store:
    """A store, or where one is (a directory — a ``Path`` too —, a Qdrant URL, ``:memory:``; None: the default)."""
    if store is None or isinstance(store, (str, os.PathLike)):
        return open_store(str(store) if store else default_store())
    return store
