"""Retrieval metrics per question (docs/methods.md#retrieval-metrics), on page ids in ranked order.

Pages, not passages: a question is answered by a page (``doc_id``) and every chunk or language
version of it counts. Ranks are positions in the list actually passed on (after merge and threshold).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

K_VALUES = (1, 3, 5, 10, 20)


def recall_at(ranked_pages: Sequence[str], gold: Sequence[str], k: int) -> float:
    """Share of the gold pages found in the top k (a question may need several pages)."""
    wanted = set(gold)
    return len(wanted & set(ranked_pages[:k])) / len(wanted) if wanted else 0.0


def hit_at(ranked_pages: Sequence[str], gold: Sequence[str], k: int) -> float:
    return float(bool(set(gold) & set(ranked_pages[:k])))


def reciprocal_rank(ranked_pages: Sequence[str], gold: Sequence[str]) -> float:
    wanted = set(gold)
    return next((1.0 / rank for rank, page in enumerate(ranked_pages, start=1) if page in wanted), 0.0)


def ndcg_at(ranked_pages: Sequence[str], gold: Sequence[str], k: int = 10) -> float:
    """Binary gain, each gold page counted at its first position only."""
    wanted, seen, dcg = set(gold), set(), 0.0
    for rank, page in enumerate(ranked_pages[:k], start=1):
        if page in wanted and page not in seen:
            seen.add(page)
            dcg += 1.0 / math.log2(rank + 1)
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(wanted), k) + 1))
    return dcg / ideal if ideal else 0.0


def retrieval_scores(ranked_pages: Sequence[str], gold: Sequence[str], depth: int = 10) -> dict[str, float]:
    """Every metric the list can support: ``depth`` is how many results the configuration passes (its k),
    so recall@20 of a top-10 list — always recall@10 — is not reported."""
    cutoffs = [k for k in K_VALUES if k <= depth]
    scores = {f"recall@{k}": recall_at(ranked_pages, gold, k) for k in cutoffs}
    scores.update({f"hit@{k}": hit_at(ranked_pages, gold, k) for k in cutoffs})
    scores["mrr"] = reciprocal_rank(ranked_pages, gold)
    scores["ndcg@10"] = ndcg_at(ranked_pages, gold, 10)
    return scores
