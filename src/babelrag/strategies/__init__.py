"""Query strategies: each turns a question into the search requests (paths) to run.

One file per strategy; ``STRATEGIES`` is the registry the config's ``strategy`` field names.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from babelrag.config import SearchConfig
from babelrag.errors import ConfigError
from babelrag.strategies.as_written import AsWritten
from babelrag.strategies.delta import Delta
from babelrag.strategies.hyde import HyDE
from babelrag.strategies.kb_languages import KBLanguages
from babelrag.strategies.pivot import Pivot
from babelrag.types import Question, SearchRequest, Trace

if TYPE_CHECKING:
    from babelrag.kb import KnowledgeBase


class QueryStrategy(Protocol):
    name: str

    def plan(self, question: Question, kb: KnowledgeBase, config: SearchConfig, trace: Trace) -> list[SearchRequest]: ...


STRATEGIES: dict[str, type[QueryStrategy]] = {s.name: s for s in (AsWritten, Pivot, KBLanguages, HyDE, Delta)}


def build_strategy(name: str) -> QueryStrategy:
    if name not in STRATEGIES:
        raise ConfigError(f"strategy: unknown '{name}' (known: {', '.join(STRATEGIES)})")
    return STRATEGIES[name]()
