"""LLMs behind one protocol: a local GGUF model in-process (xllamacpp) or any OpenAI-compatible endpoint.

``complete(messages, json_schema=...)`` returns the text with its token counts and seconds;
with a schema the local backend constrains decoding with a llama.cpp grammar, the HTTP backend
asks for ``response_format: json_schema`` (falling back to plain text when the server refuses).
Validation and the one repair retry live in ``structured.py``, the same for both.
"""
from __future__ import annotations

import json
import os
import secrets
import socket
import threading
import time
from functools import cache, partial
from pathlib import Path
from typing import Any

import httpx

from babelrag import deadline, paths
from babelrag.errors import ConfigError, shown
from babelrag.models.catalog import CATALOG, model_path, verified
from babelrag.models.llm_types import LLM, Completion, LLMError, Message, OnText
from babelrag.registry import LLM_BACKENDS

__all__ = ["LLM", "Completion", "LLMError", "LocalLLM", "Message", "OpenAILLM", "build_llm", "register_llm",
           "serve_gguf"]

def _delta(chunk: dict[str, Any]) -> str:
    choices = chunk.get("choices") or [{}]
    return (choices[0].get("delta") or {}).get("content") or ""


def _finish(payload: dict[str, Any]) -> str:
    """The backend's ``finish_reason`` ("stop", "length", ...), "" when this payload gives none."""
    choices = payload.get("choices") or [{}]
    return str(choices[0].get("finish_reason") or "") if isinstance(choices[0], dict) else ""


def _completion(payload: dict[str, Any], seconds: float, model: str) -> Completion:
    try:
        text = payload["choices"][0]["message"]["content"] or ""
    except (KeyError, IndexError, TypeError) as error:
        raise LLMError(f"{model}: malformed completion: {str(payload)[:200]}") from error
    usage = payload.get("usage") or {}
    return Completion(text, int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)), seconds, model,
                      finish=_finish(payload))


def _positive_env(name: str, default: int) -> int:
    raw = os.environ.get(name, "")
    try:
        value = int(raw) if raw else default
    except ValueError as error:
        raise ConfigError(f"${name}: a whole number of slots (got '{shown(raw)}')") from error
    if not 1 <= value <= 64:
        raise ConfigError(f"${name}: between 1 and 64 (got {value})")
    return value


def _server_params(path: Path, n_ctx: int, slots: int, threads: int | None, key: str) -> Any:
    """llama.cpp's settings for one GGUF file: ``slots`` sequences decoded together, each with ``n_ctx``."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.n_ctx = n_ctx * slots  # llama.cpp splits the context between the slots
    params.n_parallel = slots
    params.api_keys = [key]
    params.verbosity = -1
    params.warmup = False
    threads = threads or paths.threads()
    if threads:
        params.cpuparams.n_threads = params.cpuparams_batch.n_threads = threads
    return params


def _prefix_reuse() -> bool:
    """Whether llama.cpp may answer from a slot's reused prompt prefix (``$BABELRAG_LLM_PREFIX_REUSE=1``). Off by
    default: measured, the same request was then answered differently depending on what the slot held before (3 of
    3 passage translations on the shipped data), which breaks the completion cache's promise and run-to-run
    comparisons; opt in where speed matters more."""
    return os.environ.get("BABELRAG_LLM_PREFIX_REUSE", "0") == "1"


def serve_gguf(path: Path | str, host: str, port: int, key: str, slots: int = 1, n_ctx: int = 8192) -> Any:
    """llama.cpp's own OpenAI-compatible HTTP server for a GGUF file (a catalog model's sha256 checked as for
    ``LocalLLM``), on ``host:port``, answering only requests that carry ``key``, with prompt-prefix reuse as the
    in-process backend has it (``_prefix_reuse``): one model several processes share (a benchmark beside
    ``tune``), and a real endpoint for babelrag's endpoint backend (``openai:MODEL@URL``). It serves while the
    returned ``xllamacpp.Server`` lives."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"llm: model file {path} not found (provision one with `babelrag models pull`)")
    if not 1 <= slots <= 64 or not 1 <= port <= 65535:
        raise ConfigError("models serve: slots between 1 and 64, a port between 1 and 65535")
    try:
        import xllamacpp
    except ImportError as error:
        raise ConfigError("models serve: needs `pip install babelrag[llm]` (xllamacpp)") from error
    verified(path)
    try:  # llama.cpp says only that it failed: find out first whether the address is the reason
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            # as llama.cpp binds: a listener refuses, a closed connection still waiting out its time does not
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as error:
        raise ConfigError(f"models serve: cannot listen on {host}:{port} ({error.strerror or 'refused'})") from None
    params = _server_params(path, n_ctx, slots, None, key)
    params.hostnames, params.port, params.cache_prompt = [host], port, _prefix_reuse()
    try:
        return xllamacpp.Server(params)
    except RuntimeError as error:
        raise ConfigError(f"models serve: llama.cpp could not start {path.name} (not a GGUF model it reads, or "
                          f"too large for this machine's memory)") from error


class LocalLLM:
    """A GGUF file run in-process by llama.cpp (xllamacpp). One server per file, shared by threads.

    ``slots`` (``$BABELRAG_LLM_SLOTS``, default 1) sequences are decoded together (continuous
    batching), each with its own ``n_ctx``. A slot's prompt prefix is reused for the next request only
    with ``$BABELRAG_LLM_PREFIX_REUSE=1``: answers then depend on what ran before. llama.cpp also
    listens on a loopback port; a random key (never shown) keeps other local users out of it."""

    def __init__(self, path: str, n_ctx: int = 8192, threads: int | None = None, slots: int | None = None):
        try:
            import xllamacpp
        except ImportError as error:
            raise ConfigError("llm: local GGUF models need `pip install babelrag[llm]` (xllamacpp)") from error
        self.path = Path(path)
        if not self.path.is_file():
            raise ConfigError(f"llm: model file {self.path} not found (provision one with `babelrag models pull`)")
        # the file's hash names the model: a file replaced under the same name never meets its old cached answers
        self.name = f"{self.path.stem}@{verified(self.path)[:12]}"
        self.slots = slots or _positive_env("BABELRAG_LLM_SLOTS", 1)
        self.prefix_reuse = _prefix_reuse()
        self._server = xllamacpp.Server(_server_params(self.path, n_ctx, self.slots, threads,
                                                       secrets.token_urlsafe(32)))

    def complete(self, messages: list[Message], json_schema: dict[str, Any] | None = None, max_tokens: int = 256,
                 temperature: float = 0.0, seed: int = 0) -> Completion:
        """Under a deadline the answer is generated as a stream, so the deadline stops it where it is
        (a plain call cannot be stopped: a 512-token answer ran ~26 s past its request's 504, held the
        only slot, and was cached); the cut completion says ``stopped`` and is never cached."""
        deadline.check("an LLM call")
        request: dict[str, Any] = {"messages": messages, "max_tokens": max_tokens, "temperature": temperature,
                                   "seed": seed, "cache_prompt": self.prefix_reuse}
        if json_schema is not None:
            request["response_format"] = {"type": "json_schema", "json_schema": {"schema": json_schema}}
        if deadline.remaining() is not None:
            return self._generate(request, lambda piece: None)
        start = time.perf_counter()
        payload = self._server.handle_chat_completions(request)
        if isinstance(payload, dict) and "error" in payload:
            raise LLMError(f"{self.name}: {payload['error']}")
        return _completion(payload, time.perf_counter() - start, self.name)

    def stream(self, messages: list[Message], on_text: OnText, max_tokens: int = 256,
               temperature: float = 0.0, seed: int = 0) -> Completion:
        deadline.check("an LLM call")
        return self._generate({"messages": messages, "max_tokens": max_tokens, "temperature": temperature,
                               "seed": seed, "cache_prompt": self.prefix_reuse}, on_text)

    def _generate(self, request: dict[str, Any], on_text: OnText) -> Completion:
        """``request`` streamed: each piece to ``on_text``, stopped when it says so or the deadline passes."""
        pieces: list[str] = []
        counts = {"prompt_n": 0, "predicted_n": 0}
        stopped, errors, finish = False, [], ""

        def receive(chunk: dict[str, Any]) -> bool:
            nonlocal stopped, finish
            if "error" in chunk:
                errors.append(chunk["error"])
                return True
            finish = _finish(chunk) or finish
            piece = _delta(chunk)
            if piece:
                pieces.append(piece)
                stopped = bool(on_text(piece))
            counts.update({k: v for k, v in (chunk.get("timings") or {}).items() if k in counts})
            left = deadline.remaining()
            stopped = stopped or (not finish and left is not None and left <= 0)  # a finished answer is whole
            return stopped  # True stops generation

        start = time.perf_counter()
        self._server.handle_chat_completions({**request, "stream": True}, receive)
        if errors:
            raise LLMError(f"{self.name}: {errors[0]}")
        # a stopped stream never gets its final counts: each piece is a token
        return Completion("".join(pieces), int(counts["prompt_n"]), max(int(counts["predicted_n"]), len(pieces)),
                          time.perf_counter() - start, self.name, stopped=stopped, finish=finish)


class OpenAILLM:
    """Any OpenAI-compatible ``/chat/completions`` endpoint (vLLM, Ollama, llama.cpp server, hosted APIs)."""

    def __init__(self, base_url: str, model: str, api_key_env: str = "OPENAI_API_KEY", timeout: float = 120.0,
                 retries: int = 3, slots: int | None = None, extra_body: dict[str, Any] | None = None):
        """``slots``: requests worth sending at once (``$BABELRAG_LLM_CONCURRENCY``, default 4); the
        endpoint knows its own capacity, so this is the user's setting, not a probe. ``extra_body``:
        fields one server understands and others may refuse, sent with every request (a llama.cpp
        server's ``{"cache_prompt": False}`` makes its answers independent of what ran before)."""
        self.base_url, self.model, self.retries = base_url.rstrip("/"), model, retries
        self.extra_body = dict(extra_body or {})
        self.slots = slots or _positive_env("BABELRAG_LLM_CONCURRENCY", 4)
        self.name = f"{model}@{self.base_url}"
        key = os.environ.get(api_key_env, "not-needed")
        self._gate = threading.BoundedSemaphore(self.slots)  # at most `slots` requests out, however many threads
        limits = httpx.Limits(max_connections=max(self.slots, 10), max_keepalive_connections=max(self.slots, 10))
        self._client = httpx.Client(timeout=timeout, headers={"Authorization": f"Bearer {key}"}, limits=limits)
        self._schema_supported = True

    def _post(self, body: dict[str, Any]) -> httpx.Response:
        url = f"{self.base_url}/chat/completions"
        for attempt in range(self.retries + 1):
            deadline.check("an LLM call")
            left = deadline.remaining()
            try:
                with self._gate:
                    response = self._client.post(url, json=body, **({"timeout": max(left, 0.1)} if left else {}))
            except httpx.TransportError as error:
                if attempt == self.retries:
                    raise LLMError(f"LLM endpoint {url} unreachable after {attempt + 1} tries: {error}") from error
            else:
                if response.status_code != 429 and response.status_code < 500:
                    return response
                if attempt == self.retries:
                    raise LLMError(f"LLM endpoint {url}: {response.status_code} {response.text[:200]}")
            time.sleep(min(16.0, 0.5 * 2 ** attempt))
        raise LLMError(f"LLM endpoint {url} kept failing")

    def complete(self, messages: list[Message], json_schema: dict[str, Any] | None = None, max_tokens: int = 256,
                 temperature: float = 0.0, seed: int = 0) -> Completion:
        body: dict[str, Any] = {**self.extra_body, "model": self.model, "messages": messages,
                                "max_tokens": max_tokens, "temperature": temperature, "seed": seed}
        if json_schema is not None and self._schema_supported:
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "answer", "schema": json_schema, "strict": True}}
        start = time.perf_counter()
        response = self._post(body)
        if response.status_code == 400 and "response_format" in body:  # no schema support: validate afterwards
            self._schema_supported = False
            body.pop("response_format")
            response = self._post(body)
        if response.status_code >= 400:
            raise LLMError(f"LLM endpoint refused the request: {response.status_code} {response.text[:200]}")
        return _completion(response.json(), time.perf_counter() - start, self.name)

    def stream(self, messages: list[Message], on_text: OnText, max_tokens: int = 256,
               temperature: float = 0.0, seed: int = 0) -> Completion:
        deadline.check("an LLM call")
        body = {**self.extra_body, "model": self.model, "messages": messages, "max_tokens": max_tokens,
                "temperature": temperature, "seed": seed, "stream": True, "stream_options": {"include_usage": True}}
        url = f"{self.base_url}/chat/completions"
        for attempt in range(self.retries + 1):  # retried like `complete` while nothing has been handed on
            deadline.check("an LLM call")
            try:
                return self._stream_once(url, body, on_text)
            except _Retry as busy:
                if attempt == self.retries:
                    raise LLMError(f"LLM endpoint {url}: {busy}") from busy
            except httpx.TransportError as error:
                if attempt == self.retries:
                    raise LLMError(f"LLM endpoint {url} unreachable after {attempt + 1} tries: {error}") from error
            time.sleep(min(16.0, 0.5 * 2 ** attempt))
        raise LLMError(f"LLM endpoint {url} kept failing")

    def _stream_once(self, url: str, body: dict[str, Any], on_text: OnText) -> Completion:
        pieces: list[str] = []
        usage: dict[str, Any] = {}
        stopped, finish = False, ""
        start = time.perf_counter()
        left = deadline.remaining()
        with self._gate, self._client.stream("POST", url, json=body,
                                             **({"timeout": max(left, 0.1)} if left else {})) as response:
            if response.status_code == 429 or response.status_code >= 500:
                raise _Retry(f"{response.status_code} {response.read()[:200]!r}")
            if response.status_code >= 400:
                raise LLMError(f"LLM endpoint refused the request: {response.status_code} {response.read()[:200]!r}")
            try:
                for line in response.iter_lines():
                    if not line.startswith("data:") or line.strip() == "data: [DONE]":
                        continue
                    chunk = json.loads(line.removeprefix("data:").strip())
                    usage = chunk.get("usage") or usage
                    finish = _finish(chunk) or finish
                    if piece := _delta(chunk):
                        pieces.append(piece)
                        stopped = bool(on_text(piece))
                    if stopped or (not finish and (left := deadline.remaining()) is not None and left <= 0):
                        stopped = True
                        break  # enough, out of time, or nobody listening any more: closing the stream stops it
            except httpx.TransportError as error:  # mid-answer: part of it was handed on, no retry
                raise LLMError(f"LLM endpoint {self.base_url} broke off: {error}") from error
        return Completion("".join(pieces), int(usage.get("prompt_tokens", 0)),
                          int(usage.get("completion_tokens", 0)) or len(pieces), time.perf_counter() - start,
                          self.name, stopped=stopped, finish=finish)


class _Retry(Exception):
    """A busy or failing endpoint before any text came: worth asking again."""


_lock = threading.Lock()
_registered: dict[str, LLM] = {}


def build_llm(spec: str) -> LLM:
    """``NAME`` (a provisioned model, see ``babelrag models``), a ``.gguf`` path, ``openai:MODEL[@URL]``
    (URL default ``$BABELRAG_LLM_URL`` or ``$OPENAI_BASE_URL``; key from ``$OPENAI_API_KEY``), or a name
    given to an LLM object with ``register_llm``."""
    with _lock:
        return Bounded(_registered.get(spec) or _build(spec))


def register_llm(name: str, llm: LLM | None) -> None:
    """Make ``llm`` what ``build_llm(name)`` returns in this process; ``None`` removes it."""
    with _lock:
        if llm is None:
            _registered.pop(name, None)
        else:
            _registered[name] = llm


def slots_of(spec: str) -> int:
    """How many requests the model behind ``spec`` serves at once (1 when it does not say)."""
    return int(getattr(build_llm(spec), "slots", 1))


class Bounded:
    """Any LLM, refusing to start a call once the request's deadline has passed (``deadline.py``)."""

    def __init__(self, inner: LLM):
        self.inner, self.name = inner, inner.name
        self.slots = int(getattr(inner, "slots", 1))

    def complete(self, messages: list[Message], json_schema: dict[str, Any] | None = None, max_tokens: int = 256,
                 temperature: float = 0.0, seed: int = 0) -> Completion:
        deadline.check("an LLM call")
        return self.inner.complete(messages, json_schema, max_tokens, temperature, seed)

    def stream(self, messages: list[Message], on_text: OnText, max_tokens: int = 256,
               temperature: float = 0.0, seed: int = 0) -> Completion:
        deadline.check("an LLM call")
        return self.inner.stream(messages, on_text, max_tokens, temperature, seed)


@LLM_BACKENDS.register("openai", argument="MODEL@URL",
                       about="any OpenAI-compatible endpoint (URL default $BABELRAG_LLM_URL or $OPENAI_BASE_URL)")
def _endpoint(argument: str) -> LLM:
    model, _, url = argument.partition("@")
    url = url or os.environ.get("BABELRAG_LLM_URL") or os.environ.get("OPENAI_BASE_URL", "")
    if not url:
        raise ConfigError(f"llm 'openai:{shown(argument)}': no endpoint; write openai:MODEL@URL or set "
                          f"$BABELRAG_LLM_URL")
    return OpenAILLM(url, model)


@LLM_BACKENDS.register("gguf", argument="PATH", about="a local GGUF file (also written as a bare PATH.gguf)")
def _gguf(path: str) -> LLM:
    return LocalLLM(path)


def _provisioned(name: str) -> LLM:
    """A catalog model, from where ``babelrag models pull`` put it."""
    return LocalLLM(str(model_path(name)))


for _model in CATALOG.values():
    LLM_BACKENDS.register(_model.name, about=_model.note)(partial(_provisioned, _model.name))


def _backend(spec: str) -> str:
    """A bare ``PATH.gguf`` is the ``gguf`` backend's argument."""
    return f"gguf:{spec}" if spec.endswith(".gguf") and not spec.startswith("gguf:") else spec


def check_llm(spec: str, field: str = "llm") -> None:
    """A ``ConfigError`` naming ``field`` unless ``spec`` names a backend or an object given to ``register_llm``."""
    with _lock:
        if spec in _registered:
            return
    LLM_BACKENDS.entry(_backend(spec), field, also=("PATH.gguf", "a name given to register_llm"))


@cache
def _build(spec: str) -> LLM:
    llm = LLM_BACKENDS.make(_backend(spec))
    if os.environ.get("BABELRAG_LLM_CACHE", "1") == "0":
        return llm
    from babelrag.models.llm_cache import CachedLLM
    from babelrag.paths import cache_dir

    return CachedLLM(llm, cache_dir() / "llm.sqlite")
