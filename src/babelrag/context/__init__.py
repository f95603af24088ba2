"""Context strategies: what the generator reads, built from the top passages (docs/methods.md#context-strategies).

One file each, registering itself in ``registry.CONTEXTS`` with its parameters and facts; the imports
below are the registration lines. They compose with any query strategy (``delta+crossrag``). Every
context strategy is built with the ``Models`` it may call.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from babelrag.context import crossrag, dkm, multirag, qtt  # noqa: F401
from babelrag.models.bundle import Models
from babelrag.registry import CONTEXTS
from babelrag.search_config import SearchConfig
from babelrag.types import Context, Hit, Question, Trace


class ContextStrategy(Protocol):
    name: str

    def build(self, question: Question, evidence: Sequence[Hit], config: SearchConfig, trace: Trace) -> Context: ...


def build_context(name: str, models: Models) -> ContextStrategy:
    """The context strategy ``name`` names, holding the models it may call."""
    return CONTEXTS.make(name, models)
