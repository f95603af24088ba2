"""Query strategies: each turns a question into the search requests (paths) to run.

One file per strategy; ``STRATEGIES`` is the registry the config's ``strategy`` field names. A
looping strategy (CORAL) decides each round from the last one's results, so instead of planning
up front it drives the same search stage itself and returns its evidence ranking. A resolving
strategy (tuned) picks, per question, the configuration whose strategy then runs.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from babelrag.config import SearchConfig
from babelrag.errors import ConfigError
from babelrag.strategies.as_written import AsWritten
from babelrag.strategies.coral import Coral
from babelrag.strategies.delta import Delta
from babelrag.strategies.hyde import HyDE
from babelrag.strategies.kb_languages import KBLanguages
from babelrag.strategies.pivot import Pivot
from babelrag.strategies.tuned import Tuned
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
STRATEGIES: dict[str, type[Strategy]] = {s.name: s for s in (AsWritten, Pivot, KBLanguages, HyDE, Delta, Coral, Tuned)}


def build_strategy(name: str) -> Strategy:
    if name not in STRATEGIES:
        raise ConfigError(f"strategy: unknown '{name}' (known: {', '.join(STRATEGIES)})")
    return STRATEGIES[name]()
