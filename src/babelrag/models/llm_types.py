"""What every LLM backend shares: the message shape, a completion with its cost, the protocol, the error.

Kept apart from the backends so the completion cache can wrap any of them without importing them.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from babelrag.errors import BabelragError

Message = dict[str, str]


class LLMError(BabelragError):
    """The model could not be reached or produced no usable answer."""


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    model: str
    cached: bool = False  # served from the completion cache (tokens and seconds are the original call's)


class LLM(Protocol):
    name: str  # identifies the model in caches and traces

    def complete(self, messages: list[Message], json_schema: dict[str, Any] | None = None, max_tokens: int = 256,
                 temperature: float = 0.0, seed: int = 0) -> Completion: ...

    def stream(self, messages: list[Message], on_text: Callable[[str], None], max_tokens: int = 256,
               temperature: float = 0.0, seed: int = 0) -> Completion:
        """Like ``complete``, handing each piece of text to ``on_text`` as it is generated."""
        ...
