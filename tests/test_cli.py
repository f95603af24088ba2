"""The command line as users call it: exit codes and messages for bad input and missing KBs."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest



def babelrag(*args: str, store: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, BABELRAG_STORE=store, BABELRAG_PROGRESS="0")
    return subprocess.run([sys.executable, "-m", "babelrag", *args], capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.mark.slow
def test_index_search_delete_roundtrip(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    source = tmp_path / "kb.jsonl"
    source.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in [
        {"id": "a", "text": "Stockholm är Sveriges huvudstad.", "country": "SE"},
        {"id": "b", "text": "Warszawa jest stolicą Polski.", "country": "PL"}]), encoding="utf-8")
    indexed = babelrag("index", str(source), "--kb", "demo", store=store)
    assert indexed.returncode == 0, indexed.stderr
    assert "2 documents → 2 passages" in indexed.stderr
    found = babelrag("search", "Vad är Sveriges huvudstad?", "--kb", "demo", "--json", "-k", "1", store=store)
    assert found.returncode == 0, found.stderr
    result = json.loads(found.stdout)
    assert result["evidence"][0]["id"] == "a" and result["question"]["lang"] == "sv"
    assert result["passed"] == 1 and result["trace"]["steps"]
    filtered = babelrag("search", "huvudstad", "--kb", "demo", "--country", "PL", "--json", store=store)
    assert [e["id"] for e in json.loads(filtered.stdout)["evidence"]] == ["b"]
    listed = babelrag("kbs", "--json", store=store)
    assert json.loads(listed.stdout)[0]["languages"] == {"sv": 1, "pl": 1}
    deleted = babelrag("delete", "--kb", "demo", "a", store=store)
    assert deleted.returncode == 0 and "deleted 1 passages" in deleted.stderr
    dropped = babelrag("delete", "--kb", "demo", "--all", store=store)
    assert dropped.returncode == 0 and babelrag("kbs", "--json", store=store).stdout.strip() == "[]"


def test_errors_exit_non_zero_with_a_located_message(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "text": "ok"}\n{"id": "b", "text": "oops"\n', encoding="utf-8")
    result = babelrag("index", str(bad), "--kb", "demo", store=store)
    assert result.returncode == 1 and f"{bad}:2: invalid JSON" in result.stderr
    assert "Traceback" not in result.stderr
    missing = babelrag("search", "hello", "--kb", "nope", store=store)
    assert missing.returncode == 1 and "knowledge base 'nope' not found" in missing.stderr
    unknown = babelrag("search", "hello", "--kb", "nope", "--mode", "magic", store=store)
    assert unknown.returncode != 0
    absent = babelrag("index", str(tmp_path / "absent.jsonl"), "--kb", "demo", store=store)
    assert absent.returncode == 1 and "file not found" in absent.stderr


@pytest.mark.slow
def test_search_with_translation_paths_answers_with_warnings_not_errors(tmp_path: Path) -> None:
    """The chat preset on a Greek question (the 0.5B translator loops or copies its prompt's example for
    it): results, with any failed translation reported as a warning in the JSON and on stderr."""
    from conftest import need_llm, small_squad

    llm = need_llm()
    store = str(tmp_path / "store")
    files = small_squad(tmp_path / "xquad", langs=("de", "zh"))
    assert babelrag("index", *map(str, files), "--kb", "dezh", store=store).returncode == 0
    question = "Πόσους πόντους έδωσε η άμυνα των Panthers;"
    found = babelrag("search", question, "--kb", "dezh", "--preset", "chat", "--llm", llm, "--query-lang", "el",
                     "--json", store=store)
    assert found.returncode == 0, found.stderr
    result = json.loads(found.stdout)
    assert result["evidence"] and result["evidence"][0]["doc_id"] == "Super_Bowl_50#0"
    assert [f"{f['stage']} failed" for f in result["trace"]["failures"]] == [w.split(" (")[0] for w in result["warnings"]]
    shown = babelrag("search", question, "--kb", "dezh", "--preset", "chat", "--llm", llm, "--query-lang", "el",
                     store=store)
    assert shown.returncode == 0 and shown.stderr.count("warning:") == len(result["warnings"])
