"""What the learned relevance model reads about one candidate of one path: signals both retrieval arms
already produced, put on scales that mean the same on every path and in every language.

Raw cosines and BM25 totals shift with the query's language and length, so next to them each path's
candidates are also described relative to each other (the gap to the best cosine, z-scores, ranks,
BM25 over the path's best). Nothing here calls a model: the dense cosine uses the stored passage
vector, coverage the passage's stored keyword terms.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from babelrag.lang.languages import script_of
from babelrag.types import Hit, SearchRequest

FEATURES: tuple[str, ...] = (
    "dense", "dense_gap", "dense_z", "dense_rank", "bm25_log", "bm25_norm", "bm25_z", "bm25_hit", "bm25_rank",
    "coverage", "query_terms", "same_lang", "same_script", "translated", "generated", "length",
    "bm25_norm:same_script", "coverage:same_script", "dense_gap:same_lang",
    "hybrid",
)
KEYWORD_WEIGHT = 0.5  # the ``hybrid`` feature: zscore fusion's own combination of the two arms



def feature_matrix(hits: Sequence[Hit], request: SearchRequest, query_vector: np.ndarray | None,
                   query_terms: frozenset[int]) -> np.ndarray:
    """One row per hit, columns in ``FEATURES`` order."""
    n = len(hits)
    if n == 0:
        return np.zeros((0, len(FEATURES)))
    dense = np.array([float(h.vector @ query_vector) if h.vector is not None and query_vector is not None
                      else h.signals.get("dense", 0.0) for h in hits])
    bm25 = np.array([h.signals.get("bm25", 0.0) for h in hits])
    bm25_rank = np.array([h.signals.get("bm25_rank", n + 1) for h in hits])  # not returned: past every candidate
    dense_rank = np.empty(n)
    dense_rank[np.argsort(-dense, kind="stable")] = np.arange(1, n + 1)
    std = dense.std()
    coverage = np.array([len(query_terms & h.terms) / len(query_terms) if query_terms and h.terms is not None
                         else 0.0 for h in hits])
    langs = [h.passage.lang for h in hits]
    same_lang = np.array([lang == request.lang for lang in langs], dtype=float)
    scripts = {lang: script_of(lang) == script_of(request.lang) for lang in set(langs)}
    same_script = np.array([scripts[lang] for lang in langs], dtype=float)
    bm25_norm = bm25 / bm25.max() if bm25.max() > 0 else np.zeros(n)
    bm25_std = bm25.std()  # over every candidate, 0 where the keyword arm found no query term (as zscore fusion)
    bm25_z = (bm25 - bm25.mean()) / bm25_std if bm25_std > 0 else np.zeros(n)
    dense_z = (dense - dense.mean()) / std if std > 0 else np.zeros(n)
    dense_gap = dense - dense.max()
    columns = {
        "dense": dense, "dense_gap": dense_gap, "dense_z": dense_z,
        "dense_rank": np.log(dense_rank), "bm25_log": np.log1p(bm25), "bm25_norm": bm25_norm,
        "bm25_z": bm25_z,
        "bm25_hit": (bm25 > 0).astype(float), "bm25_rank": np.log(bm25_rank), "coverage": coverage,
        "query_terms": np.full(n, np.log1p(len(query_terms))), "same_lang": same_lang, "same_script": same_script,
        "translated": np.full(n, float(request.origin == "translated")),
        "generated": np.full(n, float(request.origin == "generated")),
        "length": np.log1p(np.array([len(h.passage.text) for h in hits], dtype=float)),
        "bm25_norm:same_script": bm25_norm * same_script, "coverage:same_script": coverage * same_script,
        "dense_gap:same_lang": dense_gap * same_lang,
        "hybrid": dense_z + KEYWORD_WEIGHT * bm25_z,
    }
    return np.column_stack([columns[name] for name in FEATURES])
