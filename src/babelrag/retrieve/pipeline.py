"""The search flow: question → (resolve a tuned cell) → plan (strategy) → paths → rerank each → merge →
(collapse to pages) → threshold → top-k.

Every stage writes to the trace; a strategy only plans requests, so a new strategy is a new
file and a registry entry, never a change here.
"""
from __future__ import annotations

import threading
from dataclasses import replace

from babelrag.concurrency import traced_in_order
from babelrag.config import plans_several_paths
from babelrag.kb import KnowledgeBase
from babelrag.lang.detect import detector
from babelrag.models.bundle import Models
from babelrag.models.llm_types import LLMError
from babelrag.models.rerank import build_reranker
from babelrag.errors import ConfigError
from babelrag.relevance.model import RelevanceModel, default_model, model_for
from babelrag.retrieve.cache import RetrievalCache
from babelrag.retrieve.fusion import fuse
from babelrag.retrieve.search import TRACE_HITS, as_originals, rerank, retrieve
from babelrag.search_config import SearchConfig
from babelrag.strategies import LoopingStrategy, ResolvingStrategy, build_strategy
from babelrag.strategies.as_written import AsWritten
from babelrag.strategies.tuned import load_profile
from babelrag.types import Hit, Question, Ranking, SearchRequest, SearchResult, Trace

PATH_THREADS = 4  # paths run at once; more paths queue (each holds up to ``candidates`` hits)


def resolve_rerank(kb: KnowledgeBase, config: SearchConfig) -> tuple[str, RelevanceModel | None]:
    """The reranker this KB gets and its relevance model. ``auto`` (the default) is the learned stage whenever
    a relevance model fits the KB's embedder — its tuned one, else the shipped one — and no reranking for a KB
    built by another embedder (a cosine from another model means something else); a configuration that
    needs one scale (a threshold, max-merged paths) is then refused rather than silently changed."""
    rerank = config.rerank
    learned = ("auto", "learned", "learned:default")
    profile = load_profile(kb, config.profile).model if config.profile and rerank in learned else None  # read once here
    if rerank == "auto":
        model = model_for(kb.manifest.profile, profile)
        if model.meta.get("embedder") == kb.embedder.fingerprint():
            # a model of this embedder written by a version with other features: said, never skipped
            model.check(kb.embedder.fingerprint(), kb.name)
            rerank = "learned"
        elif config.threshold is not None or (config.merge == "max" and plans_several_paths(config)):
            raise ConfigError(f"rerank: auto found no relevance model for the embedder of knowledge base '{kb.name}' "
                              f"(run `babelrag tune`), and a threshold or max-merged paths need one score scale: "
                              f"set rerank (e.g. dense-resort) or use merge=rrf without a threshold")
        else:
            return "none", None
    if rerank not in ("learned", "learned:default"):
        return rerank, None
    relevance = default_model() if rerank == "learned:default" else model_for(kb.manifest.profile, profile)
    relevance.check(kb.embedder.fingerprint(), kb.name)
    return rerank, relevance


def _tuned_at(kb: KnowledgeBase) -> str | None:
    return (kb.manifest.profile or {}).get("budget", {}).get("tuned_at")


class Searcher:
    def __init__(self, kb: KnowledgeBase, config: SearchConfig, cache: RetrievalCache | None = None,
                 models: Models | None = None, relevance: tuple[str, RelevanceModel] | None = None):
        """``models``: the LLMs and translator the strategies call (default: the configuration's, built on
        first use); ``relevance``: the reranker and relevance model already resolved for this KB and
        configuration (``resolve_rerank``), which a tuned search's per-cell searchers share with it."""
        self.kb, self.config, self.cache = kb, config, cache
        self.models = models or Models(config)
        self.rerank, self.relevance = relevance or resolve_rerank(kb, config)
        self._tuned_at = _tuned_at(kb)  # the KB's stored profile the model was resolved with
        self.reranker = build_reranker(self.rerank, kb.embedder, kb.query_vector, self.relevance)
        self.strategy = build_strategy(config.strategy, self.models)
        # asked once: a check against a runtime protocol walks its attributes (tens of µs on every search)
        self._resolving = isinstance(self.strategy, ResolvingStrategy)
        self._looping = isinstance(self.strategy, LoopingStrategy)
        self.extras = [build_strategy(name, self.models) for name in config.extra_paths]
        self._detect = detector(tuple(kb.manifest.detect_languages))
        self._by_config: dict[str, Searcher] = {}
        self._lock = threading.Lock()

    def _path(self, request: SearchRequest, trace: Trace) -> Ranking:
        rescoring = bool(self.reranker and self.reranker.needs_cosines)
        centring = bool(self.reranker and self.reranker.wants_centred_candidates)
        ranking = retrieve(self.kb, request, self.config, trace, rescoring=rescoring, cache=self.cache,
                           centring=centring)
        if self.reranker is not None:
            ranking = rerank(request, ranking, self.reranker, trace)
        return as_originals(self.kb, request, ranking, trace)

    def _plan(self, question: Question, trace: Trace) -> list[SearchRequest]:
        """Each strategy's paths. A model failure drops that strategy's paths (recorded in the trace);
        when the main strategy is left with none, the question as written is searched in its place."""
        requests = []
        for strategy in (self.strategy, *self.extras):
            failures = len(trace.failures)
            try:
                planned = strategy.plan(question, self.kb, self.config, trace)
            except LLMError as error:
                trace.fail(strategy.name, str(error), f"{strategy.name} paths dropped")
                planned = []
            if strategy is self.strategy and not planned:
                if len(trace.failures) == failures:  # a strategy that found nothing to search, said nowhere yet
                    trace.fail(strategy.name, "no usable path", "searched the question as written")
                planned = AsWritten(self.models).plan(question, self.kb, self.config, trace)
            requests.extend(planned)
        unique: dict[tuple, SearchRequest] = {}
        for request in requests:  # the same search twice finds the same candidates: run it once
            unique.setdefault((request.text, request.lang, request.segments, request.rerank_text, repr(request.filter),
                               request.index),
                              replace(request, asked=question.text))
        return list(unique.values())

    def _run_paths(self, requests: list[SearchRequest], trace: Trace) -> list[Ranking]:
        """Paths run in parallel; their query vectors are embedded first, in one batch."""
        if len(requests) == 1:
            return [self._path(requests[0], trace)]
        if self.config.mode != "keyword":
            self.kb.query_vectors([r.text for r in requests] + [r.rerank_text for r in requests if r.rerank_text])
        return traced_in_order(self._path, requests, trace, PATH_THREADS)

    def _planned(self, question: Question, trace: Trace) -> Ranking:
        with trace.step("plan", self.strategy.name, extra=list(self.config.extra_paths)) as record:
            requests = self._plan(question, trace)
            record["requests"] = [{"label": r.label, "text": r.text, "lang": r.lang,
                                   "filter": repr(r.filter)} for r in requests]
        return self._search_paths(requests, trace)

    def _search_paths(self, requests: list[SearchRequest], trace: Trace) -> Ranking:
        """Run the paths and merge them (``config.merge``): what a looping strategy calls each round."""
        rankings = self._run_paths(requests, trace)
        if len(rankings) == 1:
            return rankings[0]
        with trace.step("merge", self.config.merge, paths=[r.label for r in rankings]) as record:
            merged = fuse(rankings, self.config.merge, "merged", self.config.rrf_k)
            record["ranking"] = merged.to_trace(TRACE_HITS)
        return merged

    def _resolved(self, question: Question, trace: Trace) -> Searcher:
        """The searcher for this question: itself, or the one for the configuration a resolving
        strategy (tuned) picks for the question's cell (one per distinct configuration, kept)."""
        if not self._resolving:
            return self
        with trace.step("resolve", self.strategy.name) as record:
            config, why = self.strategy.resolve(question, self.kb, self.config)
            record.update(why)
        key = config.model_dump_json()
        # the cell's configuration reranks with the same model when it names the same reranker and profile, and
        # the KB was not tuned again since that model was read
        shared = (self.rerank, self.relevance) if self.relevance is not None and self._tuned_at == _tuned_at(self.kb) \
            and (config.rerank, config.profile) == (self.config.rerank, self.config.profile) else None
        with self._lock:
            if key not in self._by_config:
                self._by_config[key] = Searcher(self.kb, config, self.cache, self.models, shared)
            return self._by_config[key]

    def _evidence(self, question: Question, trace: Trace) -> Ranking:
        if self._looping:
            def rounds(requests: list[SearchRequest], round_trace: Trace) -> Ranking:
                return self._search_paths([replace(r, asked=question.text) for r in requests], round_trace)
            return self.strategy.loop(question, self.kb, self.config, trace, rounds)
        return self._planned(question, trace)

    def _threshold(self) -> float | None:
        if self.config.threshold != "auto":
            return self.config.threshold
        return self.relevance.meta.get("threshold") if self.relevance is not None else None

    def _select(self, merged: Ranking, trace: Trace) -> Ranking:
        """Collapse to pages (optional), then threshold, then the top k."""
        config, threshold = self.config, self._threshold()
        with trace.step("select", "evidence", threshold=threshold, k=config.k, collapse=config.collapse) as record:
            hits = merged.hits
            if config.collapse == "page":  # hits are in score order: the first of each page is its best
                seen: set[str] = set()
                hits = tuple(h for h in hits if not (h.passage.doc_id in seen or seen.add(h.passage.doc_id)))
            if threshold is not None:
                hits = tuple(h for h in hits if h.score >= threshold)
            # keyword terms are for re-scoring only (built directly: dataclasses.replace is slow)
            evidence = Ranking("evidence", merged.scorer,
                               tuple([Hit(h.passage, h.score, h.path, None, h.signals) for h in hits[:config.k]]))
            record.update(candidates=len(merged), above_threshold=len(hits), passed=len(evidence))
        return evidence

    def search(self, question: Question | str) -> SearchResult:
        trace = Trace()
        if isinstance(question, str):
            question = Question(question)
        if question.lang is None:
            with trace.step("detect", "question") as record:
                lang, confidence = self._detect.detect(question.text)
                question = replace(question, lang=lang)
                record.update(lang=lang, confidence=confidence)
        searcher = self._resolved(question, trace)
        merged = searcher._evidence(question, trace)
        return SearchResult(question, searcher._select(merged, trace), trace, candidates=len(merged))
