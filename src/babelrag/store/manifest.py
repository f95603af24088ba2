"""Index manifests: what built an index, checked every time it is opened (docs/methods.md#pitfall-index-manifest).

Vectors built by one embedder and queried by another, or terms cut by another segmenter
version, degrade silently; a manifest turns that into a refusal naming the differing field.
"""
from __future__ import annotations

import uuid
from datetime import UTC, datetime
from importlib.metadata import version
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

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


class EmbedderRecord(BaseModel):
    """The embedder that built the vectors: the spec it is rebuilt from and its dimension."""

    model_config = ConfigDict(extra="allow")

    spec: dict[str, Any]
    dim: int


class Chunking(BaseModel):
    model_config = ConfigDict(extra="allow")

    budget_tokens: int


class Bm25Record(BaseModel):
    """The term weighting fixed at creation (k1, b, avgdl), so scores stay comparable as the KB grows."""

    model_config = ConfigDict(extra="allow")

    avgdl: float
    k1: float | None = None
    b: float | None = None


class LanguageMix(BaseModel):
    """Passages per language: in the whole KB, among its global passages, and per country (the
    KB-language sets strategies search in). Empty until the first ingest counts them."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    all: dict[str, int] = Field(default_factory=dict)
    global_: dict[str, int] = Field(default_factory=dict, alias="global")
    countries: dict[str, dict[str, int]] = Field(default_factory=dict)


class LanguageOverrides(BaseModel):
    """KB-language sets declared by hand (``babelrag languages --set``); they replace the counted ones."""

    model_config = ConfigDict(extra="allow")

    all: list[str] | None = None
    countries: dict[str, list[str]] = Field(default_factory=dict)


class PivotCopiesRecord(BaseModel):
    """The KB's pivot-language copies (ingest/pivot_copies.py): their language, the translator that made
    them, how many exist and how many passages it could not translate (the reasons stay with the copies)."""

    model_config = ConfigDict(extra="allow")

    lang: str
    translator: str
    copies: int = 0
    failed: int = 0
    updated_at: str | None = None


class Manifest(BaseModel):
    """What built an index and what it holds — the one typed view of ``manifest.json`` (or a remote
    collection's metadata). Field names are those on disk; keys this version does not know are kept
    and written back, so a manifest from another version survives a round trip."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    kb: str = ""
    babelrag_version: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    components: dict[str, str]
    embedder: EmbedderRecord
    collection: dict[str, int] = Field(default_factory=dict)
    bm25: Bm25Record
    chunking: Chunking
    detect_languages: list[str]
    passages: int
    documents: int
    languages: LanguageMix = Field(default_factory=LanguageMix)
    language_overrides: LanguageOverrides = Field(default_factory=LanguageOverrides)
    profile: dict[str, Any] | None = None
    relevance: dict[str, Any] | None = None
    pivot_copies: PivotCopiesRecord | None = None
    # each language's passage count and vector sum (store/language_vectors.py); None: not counted yet (an index
    # built before they were kept), counted from the stored vectors when next needed. Typed loosely on purpose:
    # a damaged record is derived data, counted again (kb.py), and must not keep the KB from opening
    language_vectors: Any = None
    instance: str | None = None  # set at creation: tells a KB from an earlier one of the same name (a rebuild)

    @classmethod
    def parse(cls, stored: Any, kb: str) -> Manifest:
        """The manifest a store holds, or ``KBUnreadable`` naming the first bad field (never its value):
        a damaged manifest is refused when the KB opens, not in whichever request reads it first."""
        try:
            return cls.model_validate(stored)
        except ValidationError as error:
            first = error.errors(include_input=False, include_url=False)[0]
            raise KBUnreadable(kb, f"manifest: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None

    def stored(self) -> dict[str, Any]:
        """The JSON a store keeps: the names on disk (``global``), unknown keys included."""
        return self.model_dump(mode="json", by_alias=True)


def new_manifest(kb: str, *, embedder_spec: dict[str, Any], embedder_fingerprint: str, dim: int,
                 engine: str, collection: dict[str, Any], bm25: dict[str, float], chunking: dict[str, Any],
                 detect_languages: list[str], relevance: dict[str, Any]) -> Manifest:
    return Manifest(kb=kb, babelrag_version=__version__, created_at=now(), updated_at=now(), instance=uuid.uuid4().hex,
                    components=components(embedder_fingerprint, engine),
                    embedder=EmbedderRecord(spec=embedder_spec, dim=dim), collection=collection,
                    bm25=Bm25Record.model_validate(bm25), chunking=Chunking.model_validate(chunking),
                    detect_languages=detect_languages, passages=0, documents=0, relevance=relevance,
                    language_vectors={})


def differences(manifest: Manifest, current: dict[str, str]) -> list[tuple[str, object, object]]:
    built = manifest.components
    return [(name, built.get(name), value) for name, value in current.items() if built.get(name) != value]
