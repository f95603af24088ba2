"""A persistent cache of LLM completions, keyed by everything that determines them.

Decoding is greedy and seeded (temperature 0 by default), so the same request gives the same
answer: evaluation sweeps, ablations and resumed runs reuse calls instead of paying for them
again. A cached completion keeps the original tokens and seconds and says it was cached, so
cost accounting still reports what a method costs. Sampled requests (temperature > 0) bypass it.
"""
from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from babelrag.json_store import JsonStore, digest
from babelrag.models.llm_types import LLM, Completion, KeyedLocks, Message, OnText


class CachedLLM:
    def __init__(self, inner: LLM, path: Path):
        self.inner, self.name = inner, inner.name
        self.slots = int(getattr(inner, "slots", 1))
        self._store = JsonStore(path, "completions")
        self._asking = KeyedLocks()

    def _key(self, messages: list[Message], json_schema: dict[str, Any] | None, max_tokens: int, seed: int) -> str:
        return digest([self.name, messages, json_schema, max_tokens, seed])

    def _get(self, key: str) -> Completion | None:
        stored = self._store.get(key)
        return replace(Completion(**stored), cached=True) if stored else None

    def _put(self, key: str, completion: Completion) -> None:
        self._store.put(key, asdict(completion))

    def complete(self, messages: list[Message], json_schema: dict[str, Any] | None = None, max_tokens: int = 256,
                 temperature: float = 0.0, seed: int = 0) -> Completion:
        if temperature > 0:
            return self.inner.complete(messages, json_schema, max_tokens, temperature, seed)
        key = self._key(messages, json_schema, max_tokens, seed)
        with self._asking(key):
            if (hit := self._get(key)) is not None:
                return hit
            completion = self.inner.complete(messages, json_schema, max_tokens, temperature, seed)
            if not completion.stopped:
                self._put(key, completion)
            return completion

    def stream(self, messages: list[Message], on_text: OnText, max_tokens: int = 256,
               temperature: float = 0.0, seed: int = 0) -> Completion:
        """A cached answer arrives as one piece; a fresh one streams and is then stored, unless it was cut
        (the caller's stop, the deadline): a cut answer is not what the request asks for."""
        if temperature > 0:
            return self.inner.stream(messages, on_text, max_tokens, temperature, seed)
        key = self._key(messages, None, max_tokens, seed)
        with self._asking(key):
            if (hit := self._get(key)) is not None:
                on_text(hit.text)
                return hit
            stopped = False

            def relay(piece: str) -> bool:
                nonlocal stopped
                stopped = stopped or bool(on_text(piece))
                return stopped

            completion = self.inner.stream(messages, relay, max_tokens, temperature, seed)
            if not (stopped or completion.stopped):  # a backend that ignores the stop still reports nothing cut
                self._put(key, completion)
            return completion
