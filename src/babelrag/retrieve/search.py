"""One path: run its arms (dense, BM25) in one engine call, fuse, then rerank against its own text.

Before the learned stage, a third dense query adds candidates only (``CENTRED``): the question with its language's
centroid taken out. It scores nothing and fuses with nothing; its candidates join the path after fusion, so the
arms' scores and the hybrid order of every other candidate are what they were.

A path searches the KB's passages or their pivot-language copies (``request.index``, ingest/pivot_copies.py);
a copy is re-scored as what it is (a passage in the pivot language), then stands for its original.
"""
from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet

import numpy as np

from babelrag.errors import ConfigError
from babelrag.search_config import SearchConfig
from babelrag.kb import KnowledgeBase
from babelrag.lang import analyzers
from babelrag.models.rerank import Reranker
from babelrag.retrieve import bm25
from babelrag.retrieve.cache import CachedArm, RetrievalCache
from babelrag.retrieve.fusion import Arm, fuse_arms, with_candidates
from babelrag.store.base import Collection
from babelrag.store.copies import copies_where, is_current
from babelrag.store.language_vectors import LanguageCentroids
from babelrag.store.schema import DENSE, SPARSE, ArmQuery, Scored, where_for
from babelrag.types import Hit, Ranking, SearchRequest, Trace

TRACE_HITS = 20  # per ranking in the trace; ≥ k, so evidence can be re-cut at any threshold
CENTRED = "dense-centred"  # the candidates-only arm (its engine query is a dense one)
SCORERS = {DENSE: "cosine", SPARSE: "bm25", CENTRED: "centred"}  # each arm's scorer, as the retrieval cache names it
KINDS = {scorer: kind for kind, scorer in SCORERS.items()}


def _arm(label: str, kind: str, scored: Sequence[Scored], lacking: AbstractSet[str]) -> Arm:
    """One arm's hits with their ranks as returned; a hit in ``lacking`` (no cosine to re-score by: deleted
    meanwhile) drops out."""
    if not lacking:
        return Arm(label, kind, scored, range(1, len(scored) + 1))
    kept = [(s, rank) for rank, s in enumerate(scored, start=1) if s.passage.id not in lacking]
    return Arm(label, kind, [s for s, _ in kept], [rank for _, rank in kept])


def _from_cache(collection: Collection, cached: list[CachedArm], with_terms: bool) -> list[list[Scored]]:
    """The cached arms' hits, without the passages deleted since (they drop out)."""
    found = collection.fetch(list(dict.fromkeys(pid for _, _, hits, _ in cached for pid, _ in hits)), with_terms)
    return [[Scored(found[pid].passage, score, found[pid].terms if scorer == "bm25" else None)
             for pid, score in hits if pid in found]  # terms as a fresh search gives them: keyword hits
            for _, scorer, hits, _ in cached]


def _rescored(kb: KnowledgeBase, collection: Collection, request: SearchRequest, arms: Sequence[str],
             scored: Sequence[Sequence[Scored]], centroids: LanguageCentroids) -> tuple[dict[str, dict[str, float]],
                                                                                   set[str]]:
    """What re-scoring reads of every candidate: its cosine to the text the path is re-scored against (signal
    ``cosine``: the dense arm's own score when that text is the path's own, else the stored vector's product with
    it) and the same cosine with the language centroids taken out (``centered``, store/language_vectors.py);
    and the candidates deleted meanwhile, which have neither."""
    own = request.rerank_text is None
    known = {s.passage.id: s.score for arm, hits in zip(arms, scored) if own and arm == DENSE for s in hits}
    candidates = {s.passage.id: s.passage.lang for hits in scored for s in hits}
    stored = collection.vectors(list(candidates))
    if not stored:
        return {}, set(candidates)
    query = kb.query_vector(request.rerank_text or request.text)
    ids = list(stored)
    vectors = np.stack([stored[pid] for pid in ids])
    products = (vectors @ np.asarray(query, dtype=np.float32)).tolist()
    centered = centroids.cosines(query, request.lang, vectors, [candidates[pid] for pid in ids])
    rescored = {pid: {"cosine": known.get(pid, product), "centered": value}
                for pid, product, value in zip(ids, products, centered.tolist())}
    return rescored, set(candidates) - stored.keys()


def searched(kb: KnowledgeBase, request: SearchRequest) -> Collection:
    """The collection the path searches: the KB's passages or its pivot copies."""
    if request.index == "passages":
        return kb.collection
    copies = kb.pivot_copies()
    if copies is None:
        raise ConfigError(f"pivot_copies: knowledge base '{kb.name}' has no pivot copies; make them with "
                          f"`babelrag pivot-copies --kb {kb.name}`")
    return copies


def centred_limit(request: SearchRequest, config: SearchConfig, centroids: LanguageCentroids | None) -> int:
    """How many candidates the centred arm adds to this path: none unless the search asks for it (``centroids``:
    the learned stage reranks), the path searches the KB's passages (pivot copies are in one language) and the
    languages it may search (the KB's, within the path's language filter) hold the path's and another: on a path
    confined to one language the centroid moves every passage alike (``LanguageCentroids.centred_query``)."""
    if centroids is None or not config.centred_candidates or request.index != "passages" or config.mode == "keyword":
        return 0
    searchable = set(centroids.rows) & set(request.filter.langs) if request.filter.langs else set(centroids.rows)
    return config.centred_candidates if request.lang in searchable and len(searchable) > 1 else 0


def _arm_queries(kb: KnowledgeBase, request: SearchRequest, config: SearchConfig, trace: Trace,
                 rescoring: bool, centred: int, centroids: LanguageCentroids | None) -> list[tuple[str, ArmQuery]]:
    """Each arm with its kind. For re-scoring, the keyword arm's hits carry their keyword terms (query-term
    coverage); ``centred``: the centred arm's limit (0: none)."""
    arms: list[tuple[str, ArmQuery]] = []
    with trace.step("analyze", request.label, mode=config.mode) as record:
        if config.mode in ("vector", "hybrid"):
            arms.append((DENSE, ArmQuery(DENSE, dense=kb.query_vector(request.text))))
        if config.mode in ("keyword", "hybrid"):
            pieces = request.segments or ((request.text, request.lang),)
            terms = list(analyzers.query_terms(pieces))
            record["terms"] = terms
            if terms:
                arms.append((SPARSE, ArmQuery(SPARSE, sparse=bm25.query_vector(terms), with_terms=rescoring)))
        vector = (centroids.centred_query(kb.query_vector(request.text), request.lang)
                  if centred and centroids is not None else None)
        if vector is not None:
            arms.append((CENTRED, ArmQuery(DENSE, dense=vector, limit=centred)))
    return arms


def retrieve(kb: KnowledgeBase, request: SearchRequest, config: SearchConfig, trace: Trace,
             rescoring: bool = False, cache: RetrievalCache | None = None, centring: bool = False) -> Ranking:
    """Candidates for one request: each arm's top ``candidates``, fused when hybrid. ``rescoring``: each
    carries what a re-scorer reads (its cosines to the re-scoring text, ``_rescored``; keyword terms).
    ``centring`` (with ``rescoring``): the centred arm's candidates join after fusion (``centred_limit``)."""
    collection = searched(kb, request)
    where = copies_where(request.filter) if request.index == "pivot_copies" else where_for(request.filter)
    centroids = kb.language_centroids() if rescoring else None  # read once: a server's is a request
    centred = centred_limit(request, config, centroids if centring else None)
    key = cache.key(kb, request, config, centred) if cache else None
    cached = cache.get(key) if cache else None
    arms = _arm_queries(kb, request, config, trace, rescoring, centred, centroids) if cached is None else []
    place = {"cached": True} if cached is not None else {"filter": repr(request.filter), "index": request.index}
    with trace.step("retrieve", request.label, **place) as record:
        if cached is not None:
            labels = [label for label, _, _, _ in cached]
            kinds = [KINDS[scorer] for _, scorer, _, _ in cached]
            scored = _from_cache(collection, cached, rescoring)
            complete = [done for _, _, _, done in cached]
            vanished = sum(len(hits) for _, _, hits, _ in cached) - sum(len(hits) for hits in scored)
        else:
            results = collection.query([query for _, query in arms], where, config.candidates) if arms else []
            labels, kinds = [f"{request.label}/{kind}" for kind, _ in arms], [kind for kind, _ in arms]
            scored = [result.hits for result in results]
            complete = [result.complete(query.limit or config.candidates) for (_, query), result in zip(arms, results)]
            vanished = sum(result.returned - len(result) for result in results)
            if cache:
                cache.put(key, [(label, SCORERS[kind], [(s.passage.id, s.score) for s in hits], done)
                                for label, kind, hits, done in zip(labels, kinds, scored, complete)])
        rescored, lacking = (_rescored(kb, collection, request, kinds, scored, centroids) if centroids is not None
                             else (None, set()))
        every = [_arm(label, kind, hits, lacking) for label, kind, hits in zip(labels, kinds, scored, strict=True)]
        if rescoring:  # candidates deleted before their cosine was read drop out too
            vanished += sum(len(hits) for hits in scored) - sum(len(arm.hits) for arm in every)
        record["arms"] = [arm.to_trace(TRACE_HITS) for arm in every]
        if vanished:  # hits of passages deleted while this search ran: left out, counted per arm
            record["vanished"] = vanished
    found = [arm for arm in every if arm.signal != CENTRED]
    complete = [done for arm, done in zip(every, complete) if arm.signal != CENTRED]
    proposed = [arm for arm in every if arm.signal == CENTRED]
    if len(found) < 2:
        ranking = found[0].ranking(rescored, request.label) if found else Ranking(request.label, "none")
    else:
        with trace.step("fuse", request.label, method=config.fusion) as record:
            ranking = fuse_arms(found, config.fusion, request.label, rescored, config.rrf_k,
                                weights=[1.0 if arm.signal == DENSE else config.keyword_weight for arm in found],
                                complete=complete)
            record["ranking"] = ranking.to_trace(TRACE_HITS)
    return with_candidates(ranking, proposed[0], rescored) if proposed and rescored is not None else ranking


def rerank(request: SearchRequest, ranking: Ranking, reranker: Reranker, trace: Trace) -> Ranking:
    """The path's candidates re-scored against its ``rerank_text`` (default: its own text)."""
    with trace.step("rerank", ranking.label, reranker=reranker.name, candidates=len(ranking)) as record:
        scores = reranker.score(request.rerank_text or request.text, ranking.hits, request)
        # best first, ties in retrieval's order (a stable sort of the negated scores)
        order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable").tolist()
        hits = ranking.hits  # built directly, not with dataclasses.replace: this runs for every candidate
        reranked = Ranking(ranking.label, reranker.name,
                           tuple([Hit(hits[i].passage, scores[i], hits[i].path, hits[i].terms,
                                      hits[i].signals) for i in order]))
        record["ranking"] = reranked.to_trace(TRACE_HITS)
    return reranked


def as_originals(kb: KnowledgeBase, request: SearchRequest, ranking: Ranking, trace: Trace) -> Ranking:
    """A pivot-copy path's hits as the original passages they stand for, in the same order and with the
    scores the copies earned; a copy whose original is gone or changed since it was made is dropped (counted
    in the trace). A passage path's ranking is returned as it is."""
    if request.index == "passages" or not ranking.hits:
        return ranking
    with trace.step("originals", ranking.label, copies=len(ranking)) as record:
        found = kb.collection.fetch([h.passage.id for h in ranking.hits])
        hits, stale = [], 0
        for hit in ranking.hits:
            original = found.get(hit.passage.id)
            if original is None or not is_current(hit.passage, original.passage):
                stale += 1
            else:
                # the copy's keyword terms are not its original's
                hits.append(Hit(original.passage, hit.score, hit.path, signals=hit.signals))
        record.update(stale=stale, passed=len(hits))
    return Ranking(ranking.label, ranking.scorer, tuple(hits))
