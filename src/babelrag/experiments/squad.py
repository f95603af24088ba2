"""Reading a folder of parallel SQuAD-format files (XQuAD and anything shaped like it).

Files are named ``<anything>.<lang>.json``; paragraphs are pages ``<title>#<index>``, the same
id in every language, and questions share their ids across languages.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from babelrag.errors import InputError

_LANG_SUFFIX = re.compile(r"\.([a-z]{2,3}(?:-[A-Za-z]+)?)\.json$")


@dataclass(frozen=True, slots=True)
class SquadQuestion:
    qid: str
    lang: str
    text: str
    page: str
    answers: tuple[str, ...]


@dataclass
class SquadCorpus:
    folder: Path
    files: dict[str, Path] = field(default_factory=dict)
    pages: dict[str, dict[str, str]] = field(default_factory=dict)  # lang → page → text
    titles: dict[str, str] = field(default_factory=dict)  # page → article title
    questions: list[SquadQuestion] = field(default_factory=list)

    @property
    def langs(self) -> list[str]:
        return sorted(self.files)

    def articles(self) -> list[str]:
        """Article titles in file order (the first language's order)."""
        return list(dict.fromkeys(self.titles.values()))

    def answers(self, qid: str) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for q in self.questions:
            if q.qid == qid:
                out.setdefault(q.lang, []).extend(a for a in q.answers if a not in out.get(q.lang, []))
        return out


def load_squad_folder(folder: str | Path, langs: list[str] | None = None) -> SquadCorpus:
    folder = Path(folder)
    corpus = SquadCorpus(folder)
    for path in sorted(folder.glob("*.json")):
        match = _LANG_SUFFIX.search(path.name)
        if not match or (langs and match.group(1) not in langs):
            continue
        lang = match.group(1)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))["data"]
        except (json.JSONDecodeError, KeyError, UnicodeDecodeError) as error:
            raise InputError(path, None, f"not a SQuAD-format file: {error}") from error
        corpus.files[lang] = path
        pages = corpus.pages.setdefault(lang, {})
        for article in data:
            title = str(article["title"])
            for index, paragraph in enumerate(article["paragraphs"]):
                page = f"{title}#{index}"
                pages[page] = paragraph["context"]
                corpus.titles.setdefault(page, title)
                for qa in paragraph.get("qas", []):
                    answers = tuple(dict.fromkeys(a["text"] for a in qa.get("answers", [])))
                    corpus.questions.append(SquadQuestion(str(qa["id"]), lang, qa["question"], page, answers))
    if not corpus.files:
        raise InputError(folder, None, "no SQuAD-format files named <name>.<lang>.json found")
    return corpus
