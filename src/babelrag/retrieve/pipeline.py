"""The search flow: question → plan (strategy) → paths → rerank each → merge → threshold → top-k.

Every stage writes to the trace; a strategy only plans requests, so a new strategy is a new
file and a registry entry, never a change here.
"""
from __future__ import annotations

from dataclasses import replace

from babelrag.config import SearchConfig
from babelrag.kb import KnowledgeBase
from babelrag.lang.detect import detector
from babelrag.models.rerank import build_reranker
from babelrag.retrieve.cache import RetrievalCache
from babelrag.retrieve.fusion import fuse
from babelrag.retrieve.search import TRACE_HITS, rerank, retrieve
from babelrag.strategies import build_strategy
from babelrag.types import Question, Ranking, SearchRequest, SearchResult, Trace


class Searcher:
    def __init__(self, kb: KnowledgeBase, config: SearchConfig, cache: RetrievalCache | None = None):
        self.kb, self.config, self.cache = kb, config, cache
        self.reranker = build_reranker(config.rerank, kb.embedder, kb.query_vector)
        self.strategy = build_strategy(config.strategy)
        self._detect = detector(tuple(kb.manifest["detect_languages"]))

    def _path(self, request: SearchRequest, trace: Trace) -> Ranking:
        needs_vectors = bool(self.reranker and self.reranker.needs_vectors)
        ranking = retrieve(self.kb, request, self.config, trace, with_vectors=needs_vectors, cache=self.cache)
        if self.reranker is not None:
            ranking = rerank(request.text, ranking, self.reranker, trace)
        return ranking

    def search(self, question: Question | str) -> SearchResult:
        trace = Trace()
        if isinstance(question, str):
            question = Question(question)
        if question.lang is None:
            with trace.step("detect", "question") as record:
                lang, confidence = self._detect.detect(question.text)
                question = replace(question, lang=lang)
                record.update(lang=lang, confidence=confidence)
        with trace.step("plan", self.strategy.name) as record:
            requests = self.strategy.plan(question, self.kb, self.config, trace)
            record["requests"] = [{"label": r.label, "text": r.text, "lang": r.lang,
                                   "filter": repr(r.filter)} for r in requests]
        rankings = [self._path(request, trace) for request in requests]
        if len(rankings) == 1:
            merged = rankings[0]
        else:
            with trace.step("merge", self.config.merge, paths=[r.label for r in rankings]) as record:
                merged = fuse(rankings, self.config.merge, "merged", self.config.rrf_k)
                record["ranking"] = merged.to_trace(TRACE_HITS)
        with trace.step("select", "evidence", threshold=self.config.threshold, k=self.config.k) as record:
            hits = merged.hits
            if self.config.threshold is not None:
                hits = tuple(h for h in hits if h.score >= self.config.threshold)
            evidence = Ranking("evidence", merged.scorer, tuple(replace(h, vector=None) for h in hits[:self.config.k]))
            record.update(candidates=len(merged), above_threshold=len(hits), passed=len(evidence))
        return SearchResult(question, evidence, trace, candidates=len(merged))
