"""The SweFAQ benchmark: Swedish public-sector FAQ answers as a Swedish KB, and their questions.

Each unique candidate answer becomes a passage (page id = a stable hash of its text); each
question's gold page is its labelled answer. Source: SuperLim-2 SweFAQ dev, CC BY 4.0.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from babelrag.bench.io import write_jsonl
from babelrag.errors import InputError
from babelrag.evaluate.golden import GoldenQuestion, save_golden
from babelrag.ingest.readers import read_jsonl

INDEX = "swefaq"
COUNTRY = "SE"


def _page(answer: str) -> str:
    return "swefaq-" + hashlib.sha1(answer.encode("utf-8")).hexdigest()[:12]


def build(source: Path, out: Path, questions: int | None = None) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    passages: dict[str, dict[str, Any]] = {}
    golden = []
    for raw in read_jsonl(source):
        row = raw.data
        try:
            answers, label, question = row["candidate_answers"], int(row["label"]), row["question"]
            gold = answers[label]
        except (KeyError, IndexError, TypeError, ValueError) as error:
            raise InputError(source, raw.line, f"not a SweFAQ row ({error!r})") from error
        for answer in answers:
            passages.setdefault(_page(answer), {"id": _page(answer), "doc_id": _page(answer), "text": answer,
                                                "lang": "sv", "country": COUNTRY, "scope": "local",
                                                "title": f"category {row.get('category_id', '')}".strip()})
        golden.append(GoldenQuestion(id=f"swefaq:{raw.line}", question=question, lang="sv", kb="swefaq-SE",
                                     index=INDEX, country=COUNTRY, gold_pages=(_page(gold),),
                                     answers={"sv": [gold]}, tags={"split": "dev" if raw.line % 5 == 0 else "test"}))
    if questions:
        golden = golden[:questions]
    write_jsonl(out / "kb-swefaq.jsonl", passages.values())
    save_golden(golden, out / "golden.jsonl")
    (out / "LICENSE.txt").write_text("Derived from SweFAQ (SuperLim-2, Språkbanken Text): CC BY 4.0.\n",
                                     encoding="utf-8")
    return {"indexes": {INDEX: out / "kb-swefaq.jsonl"}, "golden": out / "golden.jsonl",
            "passages": len(passages), "questions": len(golden)}
