"""Every command, given bad input, answers with one `error:` line and a non-zero exit: never a traceback.
Also: --version, help texts generated from the registries, `golden`, and `ask` streaming its answer."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from babelrag.cli import main
from babelrag.config import PRESETS
from babelrag.ingest.pipeline import index_sources
from babelrag.errors import SHOWN_CHARS


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("cli-errors")
    (folder / "kb.jsonl").write_text(json.dumps({"id": "a", "text": "Stockholm är Sveriges huvudstad.", "lang": "sv",
                                                 "country": "SE"}, ensure_ascii=False), encoding="utf-8")
    index_sources("demo", [str(folder / "kb.jsonl")], str(folder / "store"))
    index_sources("demo", [str(folder / "kb.jsonl")], str(folder / "copy"))
    return str(folder / "store")


def run(capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["babelrag", *args])
    with pytest.raises(SystemExit) as ended:
        main()
    captured = capsys.readouterr()
    return ended.value.code, captured.out, captured.err


BAD = [
    ["index", "{tmp}/absent.jsonl", "--kb", "x"],
    ["index", "{tmp}/kb.jsonl", "--kb", "x", "--scope", "nowhere"],
    ["index", "{tmp}/kb.jsonl", "--kb", "x", "--lang", "english"],
    ["index", "{tmp}/kb.jsonl", "--kb", "../escape"],
    ["search", "q", "--kb", "missing"],
    ["search", "q", "--kb", "demo", "--country", "sweden"],
    ["search", "q", "--kb", "demo", "--query-lang", "english"],
    ["search", "q", "--kb", "demo", "--lang", "xx"],
    ["search", "q", "--kb", "demo", "--lang", "de"],
    ["search", "q", "--kb", "demo", "-k", "many"],
    ["search", "q", "--kb", "demo", "--mode", "magic"],
    ["search", "q", "--kb", "demo", "--rerank", "oracle"],
    ["search", "q", "--kb", "demo", "--preset", "nope"],
    ["search", "q", "--kb", "demo", "--set", "garbage"],
    ["search", "q", "--kb", "demo", "--set", "k=0"],
    ["search"],
    ["ask", "q", "--kb", "missing"],
    ["ask", "q", "--kb", "demo", "--country", "sweden"],
    ["delete", "--kb", "demo"],
    ["delete", "--kb", "missing", "a"],
    ["copy", "--kb", "demo", "--to", "{copy}"],
    ["copy", "--kb", "missing", "--to", "{tmp}/elsewhere"],
    ["info", "--kb", "missing"],
    ["languages", "--kb", "missing"],
    ["languages", "--kb", "demo", "--set", "en,english"],
    ["eval", "--golden", "{tmp}/absent.jsonl", "--kb", "demo"],
    ["tune", "--kb", "demo", "--golden", "{tmp}/absent.jsonl"],
    ["bench", "--ladder", "nonsense", "--data", "{tmp}", "--out", "{tmp}/bench-run"],
    ["report", "{tmp}/no-run"],
    ["serve", "--port", "eighty"],
    ["analyze", "gold", "--kb", "demo", "--golden", "{tmp}/absent.jsonl"],
    ["models", "pull", "no-such-model"],
    ["golden", "{tmp}/absent.json", "--kb", "demo", "--out", "{tmp}/g.jsonl"],
    ["golden", "{tmp}/no-page.csv", "--kb", "demo", "--out", "{tmp}/g.jsonl"],
    ["no-such-command"],
]


@pytest.mark.parametrize("args", BAD, ids=lambda args: " ".join(args)[:60])
def test_bad_input_is_one_error_line(store: str, tmp_path: Path, capsys, monkeypatch, args: list[str]) -> None:  # noqa: ANN001
    folder = Path(store).parent
    (folder / "no-page.csv").write_text("question,answer\nVad är huvudstaden?,Stockholm\n", encoding="utf-8")
    monkeypatch.setenv("BABELRAG_STORE", store)
    filled = [a.format(tmp=folder, copy=folder / "copy") for a in args]
    code, _, err = run(capsys, monkeypatch, *filled)
    assert code not in (0, None) and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-1].startswith("error: ") and len([line for line in lines if line.startswith("error:")]) == 1, err
    assert not (folder / "bench-run").exists()  # refused before anything was written


def test_version_help_from_registries_golden_and_a_streamed_answer(store: str, tmp_path: Path, capsys, monkeypatch,  # noqa: ANN001
                                                                   scripted) -> None:
    from babelrag import __version__

    monkeypatch.setenv("BABELRAG_STORE", store)
    assert run(capsys, monkeypatch, "--version")[:2] == (0, f"babelrag {__version__}\n")
    monkeypatch.setenv("COLUMNS", "400")  # one help line per option
    _, shown, _ = run(capsys, monkeypatch, "search", "--help")
    assert "learned:default" in shown and "dense-resort" in shown and "cross-encoder:PATH" in shown
    assert all(name in shown for name in PRESETS) and "keyword | vector | hybrid" in shown
    squad = {"data": [{"title": "Stockholm", "paragraphs": [{"context": "Stockholm är Sveriges huvudstad.", "qas": [
        {"id": "q1", "question": "Vilken stad är Sveriges huvudstad?", "answers": [{"text": "Stockholm"}]}]}]}]}
    (tmp_path / "faq.sv.json").write_text(json.dumps(squad, ensure_ascii=False), encoding="utf-8")
    (tmp_path / "pairs.csv").write_text("question,page\nWhat is the capital of Sweden?,a\n", encoding="utf-8")
    code, _, said = run(capsys, monkeypatch, "golden", str(tmp_path / "faq.sv.json"), str(tmp_path / "pairs.csv"),
                        "--kb", "demo", "--out", str(tmp_path / "golden.jsonl"))
    assert code == 0 and "wrote 2 questions" in said
    rows = [json.loads(line) for line in (tmp_path / "golden.jsonl").read_text(encoding="utf-8").splitlines()]
    assert rows[0]["gold_pages"] == ["Stockholm#0"] and rows[0]["lang"] == "sv" and rows[0]["answers"] == {
        "sv": ["Stockholm"]}
    assert rows[1]["gold_pages"] == ["a"] and rows[1]["lang"] == "en" and rows[1]["tags"]["split"] in ("dev", "test")
    # the answer's text reaches the terminal only through the stream (nothing prints it whole afterwards)
    code, shown, _ = run(capsys, monkeypatch, "ask", "Vad är Sveriges huvudstad?", "--kb", "demo", "--country", "se",
                         "--llm", scripted(lambda messages: "Stockholm [1]."))
    assert code == 0 and shown.startswith("Stockholm [1].\n") and "sources (cited" in shown


@pytest.mark.parametrize("setting, known", [("context", "multirag"), ("strategy", "kb_languages"),
                                            ("rerank", "learned"), ("translator", "mt:PATH"),
                                            ("extra_paths", "hyde")])
def test_an_unknown_method_name_fails_before_any_search(store: str, capsys, monkeypatch,  # noqa: ANN001
                                                        setting: str, known: str) -> None:
    monkeypatch.setenv("BABELRAG_STORE", store)
    code, out, err = run(capsys, monkeypatch, "search", "Vad är huvudstaden?", "--kb", "demo", "--set",
                         f"{setting}=nope")
    assert code not in (0, None) and out == ""  # nothing was searched
    [line] = [line for line in err.splitlines() if line.strip()]
    assert line.startswith(f"error: {setting}: unknown ") and "'nope'" in line and known in line


@pytest.mark.parametrize("said, args", [
    ("context: unknown", ["search", "q", "--kb", "demo", "--set", "context={name}"]),
    ("preset: unknown", ["search", "q", "--kb", "demo", "--preset", "{name}"]),
    ("ladder: unknown", ["bench", "--ladder", "{name}", "--out", "{tmp}/bench-run"]),
    ("--set '", ["search", "q", "--kb", "demo", "--set", "{name}"]),  # no '=': not a key=value pair
    ("models pull: unknown model", ["models", "pull", "{name}"]),
    ("--objective: expected", ["tune", "--kb", "demo", "--golden", "{tmp}/golden.jsonl", "--objective", "{name}"]),
    ("--scope: expected", ["index", "{tmp}/docs.jsonl", "--kb", "scoped", "--scope", "{name}"])])
def test_an_unknown_name_is_never_echoed_whole(store: str, capsys, monkeypatch, tmp_path,  # noqa: ANN001
                                               said: str, args: list[str]) -> None:
    monkeypatch.setenv("BABELRAG_STORE", store)
    long_name = "x" * 5000
    code, _, err = run(capsys, monkeypatch, *[arg.format(name=long_name, tmp=tmp_path) for arg in args])
    _, _, short = run(capsys, monkeypatch, *[arg.format(name="x", tmp=tmp_path) for arg in args])
    assert code not in (0, None) and f"error: {said}" in err and long_name not in err
    assert len(err) <= len(short) + SHOWN_CHARS  # the name's start, whatever its length
