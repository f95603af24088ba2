"""Readers for every source format; each record remembers the file and line it came from.

Formats: JSONL, CSV (header row), SQuAD-format JSON (one passage per paragraph, ``doc_id`` =
``<title>#<paragraph index>``, identical across language files), a JSON array of records, and
folders (or single files) of .txt/.md/.html.
"""
from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from babelrag.errors import InputError, shown
from babelrag.jsonl import numbered_lines

TEXT_SUFFIXES = {".txt", ".md", ".markdown", ".html", ".htm"}


@dataclass(frozen=True, slots=True)
class RawRecord:
    data: dict[str, Any]
    path: str
    line: int | None


def decode(path: Path, encoding: str = "utf-8") -> str:
    """Strict decoding: a wrong byte is reported with its line instead of turning into mojibake."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError as error:
        raise InputError(path, None, "file not found") from error
    except OSError as error:
        raise InputError(path, None, f"cannot read: {error.strerror}") from error
    try:
        return raw.decode("utf-8-sig" if encoding.lower().replace("_", "-") == "utf-8" else encoding)
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        raise InputError(path, line, f"not valid {encoding} (byte 0x{raw[error.start]:02x}); "
                                     f"re-encode the file or pass --encoding") from error
    except LookupError as error:
        raise InputError(path, None, f"unknown encoding '{shown(encoding)}'") from error


def read_jsonl(path: Path, encoding: str = "utf-8") -> Iterator[RawRecord]:
    for number, line in numbered_lines(decode(path, encoding)):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(path, number, f"invalid JSON ({error.msg} at column {error.colno})") from error
        if not isinstance(data, dict):
            raise InputError(path, number, f"expected a JSON object, got {type(data).__name__}")
        yield RawRecord(data, str(path), number)


def read_csv(path: Path, encoding: str = "utf-8") -> Iterator[RawRecord]:
    reader = csv.reader(io.StringIO(decode(path, encoding), newline=""), strict=True)
    try:
        header = next(reader)
    except StopIteration:
        return
    except csv.Error as error:
        raise InputError(path, 1, f"malformed CSV header: {error}") from error
    header = [h.strip() for h in header]
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            hint = " (a quoted field opened and never closed?)" if "end of data" in str(error) else ""
            raise InputError(path, reader.line_num, f"malformed CSV: {error}{hint}") from error
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise InputError(path, reader.line_num, f"row has {len(row)} fields, the header has {len(header)}")
        yield RawRecord({k: v for k, v in zip(header, row) if v != ""}, str(path), reader.line_num)


def _line_of(text: str, needle: str) -> int | None:
    position = text.find(needle)
    return text.count("\n", 0, position) + 1 if position >= 0 else None


def read_json(path: Path, encoding: str = "utf-8") -> Iterator[RawRecord]:
    text = decode(path, encoding)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(path, error.lineno, f"invalid JSON ({error.msg} at column {error.colno})") from error
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        yield from _squad(path, text, data["data"])
    elif isinstance(data, list):
        for index, item in enumerate(data):
            if not isinstance(item, dict):
                raise InputError(path, None, f"item {index} is {type(item).__name__}, expected an object")
            yield RawRecord(item, str(path), None)
    else:
        raise InputError(path, 1, "expected SQuAD format ({\"data\": [...]}) or a JSON array of records")


def _squad(path: Path, text: str, articles: list[Any]) -> Iterator[RawRecord]:
    stem = path.name.removesuffix(".json")
    for a_index, article in enumerate(articles):
        if not isinstance(article, dict) or not isinstance(article.get("paragraphs"), list):
            raise InputError(path, None, f"data[{a_index}] has no 'paragraphs' list")
        title = str(article.get("title") or f"article{a_index}")
        for p_index, paragraph in enumerate(article["paragraphs"]):
            context = paragraph.get("context") if isinstance(paragraph, dict) else None
            where = f"data[{a_index}].paragraphs[{p_index}]"
            if not isinstance(context, str):
                raise InputError(path, None, f"{where} has no 'context' string")
            doc_id = f"{title}#{p_index}"
            yield RawRecord({"id": f"{stem}:{doc_id}", "doc_id": doc_id, "title": title, "text": context},
                            str(path), _line_of(text, context[:40]) if context else None)


class _HTMLText(HTMLParser):
    _BLOCKS = {"p", "div", "section", "article", "li", "tr", "br", "h1", "h2", "h3", "h4", "h5", "h6",
               "blockquote", "pre", "table", "ul", "ol"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self._skip = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in ("script", "style", "noscript"):
            self._skip += 1
        elif tag == "title":
            self._in_title = True
        elif tag in self._BLOCKS:
            self.parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "noscript"):
            self._skip = max(0, self._skip - 1)
        elif tag == "title":
            self._in_title = False
        elif tag in self._BLOCKS:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data.strip()
        elif not self._skip:
            self.parts.append(data)


def _clean(text: str) -> str:
    paragraphs = (re.sub(r"[ \t\r\f\v]+", " ", p).strip() for p in re.split(r"\n\s*\n", text))
    return "\n\n".join(p for p in paragraphs if p)


def read_text_file(path: Path, root: Path, encoding: str = "utf-8") -> RawRecord:
    content = decode(path, encoding)
    record_id = path.relative_to(root).as_posix() if path != root else path.name
    title = path.stem
    if path.suffix.lower() in (".html", ".htm"):
        parser = _HTMLText()
        parser.feed(content)
        content, title = _clean("".join(parser.parts)), parser.title or title
    elif path.suffix.lower() in (".md", ".markdown"):
        heading = re.search(r"^#\s+(.+)$", content, flags=re.MULTILINE)
        title = heading.group(1).strip() if heading else title
    return RawRecord({"id": record_id, "title": title, "text": _clean(content)}, str(path), None)


def read_source(source: str | Path, encoding: str = "utf-8") -> Iterator[RawRecord]:
    path = Path(source)
    if path.is_dir():
        root = path.resolve()
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES)
        if not files:
            raise InputError(path, None, f"folder has no {'/'.join(sorted(TEXT_SUFFIXES))} files")
        for file in files:
            if not file.resolve().is_relative_to(root):  # a symlink out of the folder (notes.txt -> ~/.ssh/...)
                raise InputError(file, None, f"links outside the folder being indexed ({root}); refused")
            yield read_text_file(file, path, encoding)
        return
    if not path.exists():
        raise InputError(path, None, "file not found")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        yield from read_jsonl(path, encoding)
    elif suffix == ".csv":
        yield from read_csv(path, encoding)
    elif suffix == ".json":
        yield from read_json(path, encoding)
    elif suffix in TEXT_SUFFIXES:
        yield read_text_file(path, path.parent, encoding)
    else:
        raise InputError(path, None, f"unknown format '{shown(suffix)}' (use .jsonl, .csv, .json, "
                                     f"or a folder of .txt/.md/.html)")
