"""Source readers and validation: every format, and every kind of bad input named by file and line."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from babelrag.errors import InputError
from babelrag.ingest.readers import read_source
from babelrag.ingest.records import Defaults, validate_all

from conftest import XQUAD


def records(path: Path, defaults: Defaults = Defaults()) -> list:
    return [r.document for r in validate_all(read_source(path), defaults)]


def test_jsonl_keeps_free_fields_as_metadata(tmp_path: Path) -> None:
    source = tmp_path / "kb.jsonl"
    source.write_text('{"id": 1, "text": "Hej", "lang": "sv", "country": "SE", "agency": "1177"}\n\n'
                      '{"id": "b", "text": "Hello", "scope": "global"}\n', encoding="utf-8")
    first, second = records(source, Defaults(country="PL"))
    assert (first.id, first.lang, first.country, first.metadata) == ("1", "sv", "SE", {"agency": "1177"})
    assert (second.country, second.scope) == ("PL", "global")


def test_csv_with_header(tmp_path: Path) -> None:
    source = tmp_path / "kb.csv"
    source.write_text('id,text,lang\n1,"Hej, världen",sv\n2,Hello,en\n', encoding="utf-8")
    assert [(d.id, d.text, d.lang) for d in records(source)] == [("1", "Hej, världen", "sv"), ("2", "Hello", "en")]


def test_squad_paragraphs_become_pages_shared_across_languages() -> None:
    de = records(XQUAD / "xquad.de.json")
    en = records(XQUAD / "xquad.en.json")
    assert len(de) == len(en) == 120
    assert de[0].doc_id == en[0].doc_id == "Super_Bowl_50#0"
    assert de[0].id == "xquad.de:Super_Bowl_50#0" != en[0].id
    assert de[0].title == "Super_Bowl_50"


def test_folder_of_txt_md_html(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text("Plain text.", encoding="utf-8")
    (tmp_path / "sub" / "b.md").write_text("# Title B\n\nBody of b.", encoding="utf-8")
    (tmp_path / "c.html").write_text("<html><head><title>Page C</title><style>x{}</style></head>"
                                     "<body><p>First.</p><script>var x;</script><p>Second.</p></body></html>",
                                     encoding="utf-8")
    (tmp_path / "ignored.bin").write_bytes(b"\x00\x01")
    docs = {d.id: d for d in records(tmp_path)}
    assert set(docs) == {"a.txt", "sub/b.md", "c.html"}
    assert docs["sub/b.md"].title == "Title B"
    assert docs["c.html"].title == "Page C" and docs["c.html"].text == "First.\n\nSecond."


@pytest.mark.parametrize("content, line, fragment", [
    ('{"id": 1, "text": "ok"}\n{"id": 2, "text": "broken"\n', 2, "invalid JSON"),
    ('{"id": 1, "text": "ok"}\n["not", "an", "object"]\n', 2, "expected a JSON object"),
    ('{"id": 1, "text": "   "}\n', 1, "text"),
    ('{"text": "no id"}\n', 1, "id"),
    ('{"id": 1, "text": "a", "scope": "planet"}\n', 1, "scope"),
    ('{"id": 1, "text": "a", "lang": "english!"}\n', 1, "lang"),
    ('{"id": 1, "text": "a"}\n{"id": 1, "text": "b"}\n', 2, "duplicate id"),
])
def test_bad_jsonl_names_file_and_line(tmp_path: Path, content: str, line: int, fragment: str) -> None:
    source = tmp_path / "bad.jsonl"
    source.write_text(content, encoding="utf-8")
    with pytest.raises(InputError) as caught:
        records(source)
    assert caught.value.line == line and f"bad.jsonl:{line}" in str(caught.value)
    assert fragment in str(caught.value)


def test_bad_encoding_names_the_line(tmp_path: Path) -> None:
    source = tmp_path / "latin1.jsonl"
    source.write_bytes(b'{"id": 1, "text": "ok"}\n{"id": 2, "text": "K\xf6ln"}\n')
    with pytest.raises(InputError, match=r"latin1.jsonl:2: not valid utf-8"):
        records(source)
    assert records_with_encoding(source, "latin-1")[1].text == "Köln"


def records_with_encoding(path: Path, encoding: str) -> list:
    return [r.document for r in validate_all(read_source(path, encoding), Defaults())]


def test_csv_row_with_wrong_field_count(tmp_path: Path) -> None:
    source = tmp_path / "bad.csv"
    source.write_text("id,text\n1,fine\n2,too,many\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.csv:3: row has 3 fields"):
        records(source)


def test_missing_file_and_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="nope.jsonl: file not found"):
        records(tmp_path / "nope.jsonl")
    (tmp_path / "x.parquet").write_bytes(b"PAR1")
    with pytest.raises(InputError, match="unknown format"):
        records(tmp_path / "x.parquet")


def test_squad_without_context_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "broken.json"
    source.write_text(json.dumps({"data": [{"title": "T", "paragraphs": [{"qas": []}]}]}), encoding="utf-8")
    with pytest.raises(InputError, match=r"data\[0\].paragraphs\[0\] has no 'context'"):
        records(source)


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\u0085", "\x1c", "\x0b"])
def test_jsonl_lines_split_on_newline_only(tmp_path: Path, separator: str) -> None:
    """JSON allows these unescaped inside strings; ``str.splitlines`` would cut the record there."""
    from babelrag.evaluate.runs import read_jsonl_rows

    path = tmp_path / "docs.jsonl"
    records = [{"id": "a", "text": f"first{separator}still the first"}, {"id": "b", "text": "second"}]
    path.write_text("\r\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n", encoding="utf-8")
    read = list(read_source(path))
    assert [(r.data["text"], r.line) for r in read] == [(records[0]["text"], 1), ("second", 2)]
    assert read_jsonl_rows(path) == records  # run folders' traces read the same way
