"""Index manifests: what built an index, checked every time it is opened (SPEC §8.5).

Vectors built by one embedder and queried by another, or terms cut by another segmenter
version, degrade silently; a manifest turns that into a refusal naming the differing field.
"""
from __future__ import annotations

from datetime import UTC, datetime
from importlib.metadata import version
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from babelrag import __version__
from babelrag.errors import KBUnreadable
from babelrag.lang import analyzers

FORMAT = 1


def _major_minor(text: str) -> str:
    return ".".join(text.split(".")[:2])


def components(embedder_fingerprint: str, engine: str) -> dict[str, str]:
    """The fields that must match between the index and this install, flattened for comparison."""
    fields = {"format": str(FORMAT), "babelrag": _major_minor(__version__), "engine": engine,
              "embedder": embedder_fingerprint}
    fields.update({f"analyzer.{k}": v for k, v in analyzers.versions().items()})
    return fields


def engine_of(location: str) -> str:
    if location == ":memory:" or location.startswith(("http://", "https://")):
        return f"qdrant-client=={version('qdrant-client')}"
    return f"qdrant-edge-py=={version('qdrant-edge-py')}"


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def new_manifest(kb: str, *, embedder_spec: dict[str, Any], embedder_fingerprint: str, dim: int,
                 engine: str, collection: dict[str, Any], bm25: dict[str, float], chunking: dict[str, Any],
                 detect_languages: list[str]) -> dict[str, Any]:
    return {"kb": kb, "babelrag_version": __version__, "created_at": now(), "updated_at": now(),
            "components": components(embedder_fingerprint, engine),
            "embedder": {"spec": embedder_spec, "dim": dim}, "collection": collection, "bm25": bm25,
            "chunking": chunking, "detect_languages": detect_languages,
            "passages": 0, "documents": 0, "languages": {}, "language_overrides": {}}


class _Embedder(BaseModel):
    spec: dict[str, Any]
    dim: int


class _Chunking(BaseModel):
    model_config = ConfigDict(extra="allow")

    budget_tokens: int


class _Bm25(BaseModel):
    model_config = ConfigDict(extra="allow")

    avgdl: float


class _Shape(BaseModel):
    """What the code reads from a manifest, typed: a damaged one is refused at the door, naming the
    field, instead of failing as a KeyError or AttributeError in whichever request reads it first."""

    model_config = ConfigDict(extra="allow")

    components: dict[str, str]
    embedder: _Embedder
    bm25: _Bm25
    chunking: _Chunking
    detect_languages: list[str]
    passages: int
    documents: int
    languages: dict[str, Any]
    collection: dict[str, int] = {}
    language_overrides: dict[str, Any] = {}
    profile: dict[str, Any] | None = None


def check_shape(manifest: dict[str, Any], kb: str) -> None:
    """``KBUnreadable`` (naming the first bad field) unless the manifest has the shape babelrag writes."""
    try:
        _Shape.model_validate(manifest)
    except ValidationError as error:
        first = error.errors(include_input=False, include_url=False)[0]
        raise KBUnreadable(kb, f"manifest: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None


def differences(manifest: dict[str, Any], current: dict[str, str]) -> list[tuple[str, object, object]]:
    built = manifest.get("components", {})
    return [(name, built.get(name), value) for name, value in current.items() if built.get(name) != value]
