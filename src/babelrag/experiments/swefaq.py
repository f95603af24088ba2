"""The SweFAQ benchmark: Swedish public-sector FAQ answers as a Swedish KB, and their questions.

Each unique candidate answer becomes a passage (page id = a stable hash of its text); each
question's gold page is its labelled answer. The monolingual layout: every page and question is
Swedish. Dev or test by a hash of the gold page (``xquad_cells.split_of``; each question has its own
answer, so this is also a split by question). Source: SuperLim-2 SweFAQ dev, CC BY 4.0.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from babelrag.experiments.io import write_jsonl
from babelrag.experiments.xquad_cells import DEV_SHARE, split_of
from babelrag.errors import InputError
from babelrag.evaluate.golden import GoldenQuestion, save_golden
from babelrag.ingest.readers import read_jsonl

INDEX = "swefaq"
COUNTRY = "SE"


def _page(answer: str) -> str:
    return "swefaq-" + hashlib.sha1(answer.encode("utf-8")).hexdigest()[:12]


def _rows(source: Path) -> list[tuple[int, dict[str, Any], str]]:
    """(line, row, gold answer) per question, each checked."""
    out = []
    for raw in read_jsonl(source):
        row = raw.data
        try:
            answers, label, _ = row["candidate_answers"], int(row["label"]), str(row["question"])
            out.append((raw.line, row, answers[label]))
        except (KeyError, IndexError, TypeError, ValueError) as error:
            raise InputError(source, raw.line, f"not a SweFAQ row ({type(error).__name__})") from error
    return out


def passages(source: Path) -> list[dict[str, Any]]:
    """Every distinct candidate answer as a Swedish passage of the SE knowledge base."""
    found: dict[str, dict[str, Any]] = {}
    for _, row, _ in _rows(source):
        for answer in row["candidate_answers"]:
            found.setdefault(_page(answer), {"id": _page(answer), "doc_id": _page(answer), "text": answer,
                                             "lang": "sv", "country": COUNTRY, "scope": "local",
                                             "title": f"category {row.get('category_id', '')}".strip()})
    return list(found.values())


def questions(source: Path, limit: int | None = None) -> list[GoldenQuestion]:
    """The golden questions (the first ``limit``), each tagged with its page, split and layout."""
    golden = []
    for line, row, gold in _rows(source):
        page = _page(gold)
        golden.append(GoldenQuestion(id=f"swefaq:{line}", question=row["question"], lang="sv", kb="swefaq-SE",
                                     index=INDEX, country=COUNTRY, gold_pages=(page,), answers={"sv": [gold]},
                                     tags={"split": split_of(page, DEV_SHARE), "page": page, "article": page,
                                           "layout": "monolingual", "gold_langs": "sv",
                                           "gold_in_question_lang": "true"}))
    return golden[:limit] if limit else golden


def build(source: Path, out: Path, limit: int | None = None) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    golden = questions(source, limit)
    found = passages(source)
    write_jsonl(out / "kb-swefaq.jsonl", found)
    save_golden(golden, out / "golden.jsonl")
    (out / "LICENSE.txt").write_text("Derived from SweFAQ (SuperLim-2, Språkbanken Text): CC BY 4.0.\n",
                                     encoding="utf-8")
    return {"indexes": {INDEX: out / "kb-swefaq.jsonl"}, "golden": out / "golden.jsonl",
            "passages": len(found), "questions": len(golden)}
