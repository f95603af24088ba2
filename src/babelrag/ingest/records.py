"""Validation of source records: every problem is reported with its file, line and field."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from babelrag.codes import iso_language, language_code
from babelrag.errors import InputError, shown
from babelrag.ingest.readers import RawRecord

CORE_FIELDS = {"id", "text", "title", "lang", "country", "scope", "source", "doc_id", "metadata"}


class Document(BaseModel):
    """One source document before chunking. Unknown fields are kept as free metadata."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    id: str = Field(min_length=1)
    text: str = Field(min_length=1)
    title: str = ""
    lang: str | None = None
    country: str | None = None
    scope: Literal["global", "local"] | None = None
    source: str = ""
    doc_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id", "doc_id", mode="before")
    @classmethod
    def _ids_as_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("lang")
    @classmethod
    def _iso_code(cls, value: str | None) -> str | None:
        """The same check every search applies (``codes.py``): a KB never holds a code no search can name."""
        if value is None:
            return None
        code = iso_language(value)
        if code is None:
            raise ValueError(f"'{shown(value)}' is not an ISO 639 language code (e.g. 'sv', 'zh')")
        return code

    @field_validator("country")
    @classmethod
    def _country_case(cls, value: str | None) -> str | None:
        """Countries are compared in upper case, as searches name them (``se`` is ``SE``)."""
        return value.upper() if value else value


@dataclass(frozen=True, slots=True)
class Located:
    document: Document
    path: str
    line: int | None


@dataclass(frozen=True, slots=True)
class Defaults:
    """CLI-level values for records that don't carry their own."""

    lang: str | None = None
    country: str | None = None
    scope: Literal["global", "local"] | None = None

    def __post_init__(self) -> None:
        """A default code is checked even when every record has its own (a typo is still a typo)."""
        if self.lang is not None:
            object.__setattr__(self, "lang", language_code(self.lang, "lang"))
        if self.country is not None:
            object.__setattr__(self, "country", self.country.strip().upper())


def validate(raw: RawRecord, defaults: Defaults) -> Located:
    data = dict(raw.data)
    extra = {k: data.pop(k) for k in list(data) if k not in CORE_FIELDS}
    if extra:
        data["metadata"] = {**extra, **(data.get("metadata") or {})}
    for key in ("lang", "country", "scope"):
        if data.get(key) in (None, "") and getattr(defaults, key) is not None:
            data[key] = getattr(defaults, key)
    data.setdefault("source", raw.path)
    try:
        document = Document.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or None
        message = first["msg"]
        if first["type"] == "missing":
            message = "required field is missing"
        elif first["type"] == "string_too_short":
            message = "must not be empty"
        raise InputError(raw.path, raw.line, message, field=field) from error
    return Located(document, raw.path, raw.line)


def validate_all(records: Iterable[RawRecord], defaults: Defaults) -> list[Located]:
    """All or nothing: the first bad record stops the run before anything is written."""
    seen: dict[str, Located] = {}
    for raw in records:
        located = validate(raw, defaults)
        first = seen.get(located.document.id)
        if first is not None:
            where = first.path + (f":{first.line}" if first.line else "")
            raise InputError(raw.path, raw.line, f"duplicate id '{shown(located.document.id)}' (first seen at {where})",
                             field="id")
        seen[located.document.id] = located
    return list(seen.values())
