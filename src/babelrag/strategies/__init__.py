"""Query strategies: each turns a question into the search requests (paths) to run.

One file per strategy, registering itself in ``registry.STRATEGIES`` with its parameters and facts; the
imports below are the registration lines. A looping strategy (CORAL) decides each round from the last
one's results, so instead of planning up front it drives the same search stage itself and returns its
evidence ranking. A resolving strategy (tuned) picks, per question, the configuration whose strategy then
runs. Every strategy is built with the ``Models`` it may call.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from babelrag.models.bundle import Models
from babelrag.registry import STRATEGIES
from babelrag.search_config import SearchConfig
from babelrag.strategies import (  # noqa: F401
    as_written, coral, delta, hyde, kb_languages, pivot, pivot_copies, tuned, unaccented,
)
from babelrag.types import Question, Ranking, SearchRequest, Trace

if TYPE_CHECKING:
    from babelrag.kb import KnowledgeBase


class QueryStrategy(Protocol):
    name: str

    def plan(self, question: Question, kb: KnowledgeBase, config: SearchConfig, trace: Trace) -> list[SearchRequest]: ...


@runtime_checkable
class LoopingStrategy(Protocol):
    name: str

    def loop(self, question: Question, kb: KnowledgeBase, config: SearchConfig, trace: Trace,
             search: Callable[[list[SearchRequest], Trace], Ranking]) -> Ranking:
        """``search`` runs requests through the normal stage (retrieve, rerank, merge) and returns one ranking."""
        ...


@runtime_checkable
class ResolvingStrategy(Protocol):
    name: str

    def resolve(self, question: Question, kb: KnowledgeBase,
                config: SearchConfig) -> tuple[SearchConfig, dict[str, Any]]:
        """The configuration to search this question with, and what decided it (for the trace)."""
        ...


Strategy = QueryStrategy | LoopingStrategy | ResolvingStrategy


def build_strategy(name: str, models: Models) -> Strategy:
    """The strategy ``name`` names, holding the models it may call."""
    return STRATEGIES.make(name, models)
