"""BM25 as sparse vectors: we weight term frequencies, the engine supplies IDF (``Modifier.Idf``).

Document value = tf·(k1+1) / (tf + k1·(1 − b + b·|d|/avgdl)); query value = the term's count in the
query (BM25's sum over query terms: a term said twice counts twice, which DELTA's repetition relies on).
The engine multiplies by its own IDF, ln(1 + (N − n + 0.5)/(n + 0.5)), at query time, so IDF
stays right as the KB grows. avgdl is fixed when the KB is created (recorded in the manifest),
as in every sparse-vector BM25: changing it later would silently re-weight old documents.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from babelrag.lang.analyzers import term_id
from babelrag.store.schema import SparseTerms

K1 = 1.2
B = 0.75


def _merge(weights: dict[int, float]) -> SparseTerms:
    ordered = sorted(weights.items())
    return SparseTerms(tuple(i for i, _ in ordered), tuple(v for _, v in ordered))


def document_vector(terms: Sequence[str], avgdl: float, k1: float = K1, b: float = B) -> SparseTerms:
    length_norm = k1 * (1 - b + b * len(terms) / max(avgdl, 1.0))
    weights: dict[int, float] = {}
    for term, tf in Counter(terms).items():
        key = term_id(term)  # a hash collision adds both terms' weights, like a shared term
        weights[key] = weights.get(key, 0.0) + tf * (k1 + 1) / (tf + length_norm)
    return _merge(weights)


def query_vector(terms: Sequence[str]) -> SparseTerms:
    weights: dict[int, float] = {}
    for term, count in Counter(terms).items():
        key = term_id(term)
        weights[key] = weights.get(key, 0.0) + float(count)
    return _merge(weights)
