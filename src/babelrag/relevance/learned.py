"""``rerank: learned``: each path's candidates re-scored as P(relevant) by the relevance model.

The features come from what retrieval already returned (arm scores and ranks, each candidate's cosine to
the path's text and its keyword terms), so re-scoring 50 candidates costs one small matrix product. Scores
are calibrated probabilities: one scale across paths, languages and path kinds (as written, translated,
generated).
Every path of a question the model was fitted on is scored by the fold model that held that question
out (``RelevanceModel.for_question``), so figures on training questions are out-of-fold.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from babelrag.lang.analyzers import query_terms as analyzed, term_id
from babelrag.relevance.features import feature_matrix
from babelrag.relevance.model import RelevanceModel
from babelrag.types import Hit, SearchRequest


def query_terms(query: str, request: SearchRequest) -> frozenset[int]:
    """The keyword terms of what is scored: DELTA's segments each in their language, else the query."""
    pieces = request.segments if request.segments and request.rerank_text is None else ((query, request.lang),)
    return frozenset(map(term_id, analyzed(pieces)))


class LearnedReranker:
    needs_cosines = True
    wants_centred_candidates = True  # it reads the centred cosine, and ranks a page against its language's peers

    def __init__(self, model: RelevanceModel):
        self.model = model
        self.name = f"learned:{model.name}"

    def score(self, query: str, hits: Sequence[Hit], request: SearchRequest) -> list[float]:
        if not hits:
            return []
        rows = feature_matrix(hits, request, query_terms(query, request))
        one_path = np.zeros(len(rows), dtype=np.intp)
        return self.model.for_question(request.asked).predict(rows, one_path).tolist()
