"""Golden sets (JSONL): questions tagged with language, KB, country, gold pages and answers.

A hit on any passage of a gold page counts (pages are ``doc_id``s, shared by every chunk and
language version); gold passage ids are optional, for passage-level analysis.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from babelrag.errors import InputError, shown
from babelrag.ingest.readers import read_jsonl
from babelrag.types import Question


class GoldenQuestion(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    lang: str = Field(min_length=2)
    kb: str = Field(min_length=1)
    # The index to search when it differs from ``kb`` (several country KBs in one index).
    index: str | None = None
    country: str | None = None
    gold_pages: tuple[str, ...] = Field(min_length=1)
    gold_passages: tuple[str, ...] = ()
    answers: dict[str, list[str]] = Field(default_factory=dict)
    tags: dict[str, str] = Field(default_factory=dict)

    @field_validator("question")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    def as_question(self) -> Question:
        return Question(self.question, lang=self.lang, country=self.country, id=self.id)

    def answers_in(self, lang: str) -> list[str]:
        """Gold answers in ``lang`` only: an answer in Lq scored against another language's reference would
        measure translation, not answering (a missing reference is counted, never substituted)."""
        return list(self.answers.get(lang, []))


def sample_per_cell(questions: Sequence[GoldenQuestion], per_cell: int | None, by_kb: bool = False,
                    skip_kbs: tuple[str, ...] = ()) -> list[GoldenQuestion]:
    """A fixed sample (for steps that call a model): in each cell (or each KB, ``by_kb``), the first
    ``per_cell`` questions in hash order; None keeps them all."""
    if per_cell is None:
        return list(questions)
    cells: dict[tuple[str, str], list[GoldenQuestion]] = {}
    for q in questions:
        if q.kb not in skip_kbs:
            cells.setdefault((q.kb, "" if by_kb else q.lang), []).append(q)
    chosen = {q.id for group in cells.values()
              for q in sorted(group, key=lambda q: hashlib.sha1(q.id.encode()).hexdigest())[:per_cell]}
    return [q for q in questions if q.id in chosen]


def load_golden(path: str | Path) -> list[GoldenQuestion]:
    path = Path(path)
    questions: list[GoldenQuestion] = []
    seen: dict[str, int | None] = {}
    for raw in read_jsonl(path):
        try:
            item = GoldenQuestion.model_validate(raw.data)
        except ValidationError as error:
            first = error.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or None
            message = "required field is missing" if first["type"] == "missing" else first["msg"]
            raise InputError(path, raw.line, message, field=field) from error
        if item.id in seen:
            raise InputError(path, raw.line, f"duplicate id '{shown(item.id)}' (first at line {seen[item.id]})",
                             field="id")
        seen[item.id] = raw.line
        questions.append(item)
    if not questions:
        raise InputError(path, None, "golden set is empty")
    return questions


def save_golden(questions: Iterable[GoldenQuestion], path: str | Path) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        for item in questions:
            handle.write(json.dumps(item.model_dump(exclude_defaults=True), ensure_ascii=False) + "\n")
