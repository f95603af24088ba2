"""Index manifests: what built an index, checked every time it is opened (SPEC §8.5).

Vectors built by one embedder and queried by another, or terms cut by another segmenter
version, degrade silently; a manifest turns that into a refusal naming the differing field.
"""
from __future__ import annotations

from datetime import UTC, datetime
from importlib.metadata import version
from typing import Any

from babelrag import __version__
from babelrag.lang import analysis

FORMAT = 1


def _major_minor(text: str) -> str:
    return ".".join(text.split(".")[:2])


def components(embedder_fingerprint: str, engine: str) -> dict[str, str]:
    """The fields that must match between the index and this install, flattened for comparison."""
    fields = {"format": str(FORMAT), "babelrag": _major_minor(__version__), "engine": engine,
              "embedder": embedder_fingerprint}
    fields.update({f"analyzer.{k}": v for k, v in analysis.versions().items()})
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


def differences(manifest: dict[str, Any], current: dict[str, str]) -> list[tuple[str, object, object]]:
    built = manifest.get("components", {})
    return [(name, built.get(name), value) for name, value in current.items() if built.get(name) != value]
