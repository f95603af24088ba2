"""Context strategies: what the generator reads, built from the top passages (SPEC §4).

One file each; ``CONTEXTS`` is the registry the config's ``context`` field names. They compose
with any query strategy (``delta+crossrag``).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from babelrag.config import SearchConfig
from babelrag.context.crossrag import CrossRAG
from babelrag.context.dkm import DKM
from babelrag.context.multirag import MultiRAG
from babelrag.context.qtt import QTT
from babelrag.errors import ConfigError
from babelrag.types import Context, Hit, Question, Trace


class ContextStrategy(Protocol):
    name: str

    def build(self, question: Question, evidence: Sequence[Hit], config: SearchConfig, trace: Trace) -> Context: ...


CONTEXTS: dict[str, type[ContextStrategy]] = {c.name: c for c in (MultiRAG, CrossRAG, DKM, QTT)}


def build_context(name: str) -> ContextStrategy:
    if name not in CONTEXTS:
        raise ConfigError(f"context: unknown '{name}' (known: none, {', '.join(CONTEXTS)})")
    return CONTEXTS[name]()
