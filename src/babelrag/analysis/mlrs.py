"""MLRS — MultiLingualRankShift ([MLRS] §2; docs/methods.md#mlrs): how far non-query-language passages rise when
they are put into the query language (or, for the matrix, into any target language T).

For a query q with initial ranking D_q (r_init, 1 = best): the passages not in Lq (D_diff) are
translated into T (passages already in T keep their text), the whole list is re-scored against the
query with a real relevance model and re-sorted (r_re).
    Δr_d = max(r_init(d) − r_re(d), 0) for d ∈ D_diff;  MLRS_q = 100 · Σ Δr_d / Σ (r_init(d) − 1)
(0 when the denominator is 0), averaged per (Lq, T). Random re-scoring gives ≈ 100·(n+1)/(3n).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from babelrag.models.rerank import Reranker
from babelrag.models.translate import Translator, translate
from babelrag.types import Hit, Passage, SearchRequest, Trace


def random_reference(n: int) -> float:
    """Expected MLRS under random re-scoring when D_diff covers the list (derived in docs/methods.md#mlrs)."""
    return 100 * (n + 1) / (3 * n)


def rank_shift(initial: Sequence[str], rescored: Sequence[str], different: set[str]) -> float:
    """MLRS_q from two orders of the same ids and the ids of D_diff."""
    new_rank = {pid: rank for rank, pid in enumerate(rescored, start=1)}
    gain = most = 0
    for rank, pid in enumerate(initial, start=1):
        if pid in different:
            gain += max(rank - new_rank[pid], 0)
            most += rank - 1
    return 100.0 * gain / most if most else 0.0


@dataclass(frozen=True)
class QueryShift:
    query_id: str
    query_lang: str
    target: str
    mlrs: float
    different: int  # |D_diff|


def query_shift(query_id: str, query: str, query_lang: str, ranked: Sequence[Passage], target: str,
                rescorer: Reranker, translator: Translator, trace: Trace | None = None) -> QueryShift:
    different = {p.id for p in ranked if p.lang != query_lang}
    hits = []
    for p in ranked:
        text = p.text if p.id not in different or p.lang == target else \
            translate(translator, p.text, p.lang, target, trace)
        hits.append(Hit(replace(p, text=text), 0.0, "mlrs"))  # no cosine from retrieval: the new text is embedded
    scores = rescorer.score(query, hits, SearchRequest(query, "", query_lang))
    order = [h.passage.id for _, h in sorted(zip(scores, hits), key=lambda pair: -pair[0])]
    return QueryShift(query_id, query_lang, target, rank_shift([p.id for p in ranked], order, different),
                      len(different))
