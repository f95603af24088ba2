"""Which golden questions a configuration has already seen, so no headline figure is scored on them.

Two things can have seen a question: a tuned profile (``babelrag tune`` chose its options and
thresholds on its dev questions, and keeps their hashes) and a relevance model fitted on it
in-sample (one without fold models for it: a model from ``crossfit`` scores its own training
questions out-of-fold, which is what new questions would get, so those are not counted as seen).
Evaluation keeps seen questions out of the headline, says why, and refuses a run that would score
nothing else.
"""
from __future__ import annotations

from collections.abc import Sequence

from babelrag.config import SearchConfig
from babelrag.evaluate.golden import GoldenQuestion
from babelrag.kb import KnowledgeBase
from babelrag.registry import STRATEGIES
from babelrag.relevance.model import RelevanceModel, question_hash
from babelrag.strategies.tuned import load_profile

TUNED = "its tuned profile chose options and thresholds on them"
FITTED = "its relevance model was fitted on them (in-sample, no fold model held them out)"


def seen_questions(kb: KnowledgeBase, config: SearchConfig, model: RelevanceModel | None) -> dict[str, str]:
    """Question hash → why it was seen, for a search of ``kb`` under ``config`` reranked by ``model``."""
    seen: dict[str, str] = {}
    if model is not None:
        seen.update(dict.fromkeys(set(model.meta.get("question_hashes") or ()) - set(model.fold_of), FITTED))
    if STRATEGIES.facts(config.strategy).paths == "resolved":  # a profile chose the configuration per cell
        seen.update(dict.fromkeys(load_profile(kb, config.profile).tuned_on, TUNED))
    return seen


def mark_seen(questions: Sequence[GoldenQuestion], seen: dict[str, str]) -> dict[str, str]:
    """Question id → why, for the questions among ``questions`` that were seen."""
    return {q.id: seen[question_hash(q.question)] for q in questions if question_hash(q.question) in seen}
