"""Golden sets from data users already have: SQuAD/XQuAD files, or a CSV of questions and their pages.

``babelrag eval`` and ``tune`` read a golden set (``evaluate/golden.py``); a user should not have to
write a script to make one. From SQuAD-format JSON, every question becomes one golden question whose
gold page is its paragraph — ``<title>#<paragraph>``, the ``doc_id`` ``babelrag index`` gives the same
file's passages — with its answers; the same question id in several language files (XQuAD) is one
question in several languages (``tags.qid``), counted once by every statistic. From a CSV, a row is
``question`` and ``page`` (the gold ``doc_id``; several joined by ``|``), with optional ``id``, ``lang``,
``country`` and ``answer``. A question's language is the ``--lang`` given, the file's ``.<lang>.json``
suffix, the row's own, or detected. Questions are split dev/test by a hash of their article (or page),
so ``tune`` has dev questions and no page is in both.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from babelrag.codes import language_code
from babelrag.errors import InputError
from babelrag.evaluate.golden import GoldenQuestion
from babelrag.ingest.readers import decode, read_csv
from babelrag.lang.detect import detector

_LANG_SUFFIX = re.compile(r"\.([a-z]{2,3})\.json$")


def split_by_hash(key: str, dev_share: float) -> str:
    """dev or test by a hash of ``key`` (an article or a page): stable across files, runs and languages."""
    return "dev" if int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:8], 16) / 0xFFFFFFFF < dev_share else "test"


def _language(given: str | None, text: str) -> str:
    return language_code(given, "lang") if given else detector(None).detect(text)[0]


def _question(path: Path, line: int | None, **fields: object) -> GoldenQuestion:
    try:
        return GoldenQuestion.model_validate(fields)
    except ValidationError as error:
        first = error.errors()[0]
        raise InputError(path, line, first["msg"], field=".".join(map(str, first["loc"])) or None) from None


def from_squad(path: Path, kb: str, lang: str | None = None, dev_share: float = 0.2) -> Iterator[GoldenQuestion]:
    try:
        articles = json.loads(decode(path))["data"]
    except (json.JSONDecodeError, KeyError, TypeError) as error:
        raise InputError(path, None, f"not a SQuAD-format file ({type(error).__name__})") from None
    suffix = _LANG_SUFFIX.search(path.name)
    lang = lang or (suffix.group(1) if suffix else None)
    for a_index, article in enumerate(articles):
        title = str(article.get("title") or f"article{a_index}")
        for p_index, paragraph in enumerate(article.get("paragraphs", [])):
            for qa in paragraph.get("qas", []):
                qid, text = str(qa.get("id", "")), str(qa.get("question", ""))
                code = _language(lang, text)
                answers = list(dict.fromkeys(str(a.get("text", "")) for a in qa.get("answers", []) if a.get("text")))
                yield _question(path, None, id=f"{qid}:{code}", question=text, lang=code, kb=kb,
                                gold_pages=(f"{title}#{p_index}",), answers={code: answers} if answers else {},
                                tags={"qid": qid, "split": split_by_hash(title, dev_share)})


def from_csv(path: Path, kb: str, lang: str | None = None, dev_share: float = 0.2) -> Iterator[GoldenQuestion]:
    for number, raw in enumerate(read_csv(path), start=1):
        row = {k: (v or "").strip() for k, v in raw.data.items()}
        pages = tuple(p.strip() for p in row.get("page", "").split("|") if p.strip())
        if not pages:
            raise InputError(path, raw.line, "required field is missing", field="page")
        text = row.get("question", "")
        code = _language(row.get("lang") or lang, text) if text else "und"
        qid = row.get("id") or f"{path.stem}-{number}"
        yield _question(path, raw.line, id=qid, question=text, lang=code, kb=kb, country=row.get("country") or None,
                        gold_pages=pages, answers={code: [row["answer"]]} if row.get("answer") else {},
                        tags={"qid": qid, "split": split_by_hash(pages[0], dev_share)})


def golden_from(paths: list[str], kb: str, lang: str | None = None, dev_share: float = 0.2) -> list[GoldenQuestion]:
    """Every file's questions (``.csv`` by its header, anything else as SQuAD JSON); ids must be unique."""
    out: dict[str, GoldenQuestion] = {}
    for name in paths:
        path = Path(name)
        read = from_csv if path.suffix.lower() == ".csv" else from_squad
        for question in read(path, kb, lang, dev_share):
            if question.id in out:
                raise InputError(path, None, f"duplicate question id '{question.id[:64]}'", field="id")
            out[question.id] = question
    if not out:
        raise InputError(paths[0] if paths else "golden", None, "no questions found")
    return list(out.values())
