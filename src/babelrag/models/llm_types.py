"""What every LLM backend shares: the message shape, a completion with its cost, the protocol, the error.

Kept apart from the backends so the completion cache can wrap any of them without importing them.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from babelrag.errors import BabelragError
from babelrag.types import ended_early

Message = dict[str, str]
OnText = Callable[[str], "bool | None"]  # True: stop generating


class LLMError(BabelragError):
    """The model could not be reached or produced no usable answer."""


class KeyedLocks:
    """One lock per key (striped): a cache asks for a missing entry once while others wait for it, so
    concurrent work pays for a shared call once, as a sequential run would."""

    def __init__(self, stripes: int = 256):
        import threading

        self._locks = [threading.Lock() for _ in range(stripes)]

    def __call__(self, key: str):  # noqa: ANN204 - a lock (context manager)
        return self._locks[hash(key) % len(self._locks)]


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    model: str
    cached: bool = False  # served from the completion cache (tokens and seconds are the original call's)
    stopped: bool = False  # cut before the model finished (the caller's stop, the deadline): never cached
    finish: str = ""  # why the backend ended: "stop", "length" (its token budget); "" when it did not say

    def cut(self, max_tokens: int) -> bool:
        """Ended before the model was done: stopped, or at its token budget (see ``types.ended_early``)."""
        return self.stopped or ended_early(self.finish, self.completion_tokens, max_tokens)


class LLM(Protocol):
    name: str  # identifies the model in caches and traces

    def complete(self, messages: list[Message], json_schema: dict[str, Any] | None = None, max_tokens: int = 256,
                 temperature: float = 0.0, seed: int = 0) -> Completion: ...

    def stream(self, messages: list[Message], on_text: OnText, max_tokens: int = 256,
               temperature: float = 0.0, seed: int = 0) -> Completion:
        """Like ``complete``, handing each piece of text to ``on_text`` as it is generated; ``on_text``
        returning True stops generation there (a loop guard), the completion holding what came so far."""
        ...
