"""Evaluation logic: answer metrics (SPEC §5), retrieval metrics, cells, significance, calibration, golden sets."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from babelrag.errors import InputError
from babelrag.evaluate.answers import (
    answer_language_correct, char3gram_recall, char3grams, flexible_exact_match,
)
from babelrag.evaluate.calibrate import calibrate_threshold
from babelrag.evaluate.cells import by_cell, bootstrap_ci
from babelrag.evaluate.golden import load_golden
from babelrag.evaluate.metrics import hit_at, ndcg_at, recall_at, reciprocal_rank, retrieval_scores
from babelrag.evaluate.significance import paired_test


def test_char3grams_follow_the_spec() -> None:
    assert char3grams("Ab, cdef!") == {"ab": 1, "cde": 1, "def": 1}
    assert char3grams("a casa") == {"a": 1, "cas": 1, "asa": 1}  # Spanish "a" is a real word: kept
    assert "1834" not in "".join(char3grams("1834-08-01"))  # punctuation splits, never glues
    assert char3grams("1834-08-01") == {"183": 1, "834": 1, "08": 1, "01": 1}
    assert char3grams("北京。上海", "chirkova") == {"北京。": 1, "京。上": 1, "。上海": 1}
    assert char3grams("北京。上海", "unicode") == {"北京": 1, "上海": 1}
    assert char3grams("The cat", "bergen_code") == {"cat": 1}


def test_char3gram_recall_is_multiset_recall_max_over_references() -> None:
    assert char3gram_recall("abcabc", ["abcabc"]) == 1.0
    assert math.isclose(char3gram_recall("abcd", ["abcabc"]), 1 / 4)  # {abc} ∩ {abc:2,bca,cab}
    assert char3gram_recall("nothing", ["xyz"]) == 0.0
    assert char3gram_recall("Paris", ["Lyon", "Paris"]) == 1.0
    assert char3gram_recall("la casa", ["a casa"], "chirkova") < 1.0
    assert char3gram_recall("la casa", ["a casa"], "bergen_code") == 1.0  # the English normaliser drops "a"


def test_flexible_exact_match() -> None:
    assert flexible_exact_match("It was in 1834, in Paris.", ["Paris"])
    assert flexible_exact_match("答案是北京。", ["北京"])
    assert not flexible_exact_match("London", ["Paris"])
    assert flexible_exact_match("the answer: a", ["A"])  # no article removal: "a" is compared as is


def test_answer_language() -> None:
    assert answer_language_correct("Die Broncos haben das Spiel gewonnen.", "de", ["de", "en"]) is True
    assert answer_language_correct("The Broncos won the game.", "de", ["de", "en"]) is False
    assert answer_language_correct("1988", "de", ["de", "en"]) is None  # too short to classify


def test_retrieval_metrics_are_page_level() -> None:
    ranked = ["p3", "p1", "p1", "p2"]
    assert recall_at(ranked, ["p1", "p2"], 2) == 0.5 and recall_at(ranked, ["p1", "p2"], 4) == 1.0
    assert hit_at(ranked, ["p2"], 3) == 0.0 and hit_at(ranked, ["p2"], 4) == 1.0
    assert reciprocal_rank(ranked, ["p1"]) == 0.5 and reciprocal_rank(ranked, ["x"]) == 0.0
    ideal = 1 + 1 / math.log2(3)
    assert math.isclose(ndcg_at(ranked, ["p1", "p2"]), (1 / math.log2(3) + 1 / math.log2(5)) / ideal)
    scores = retrieval_scores(ranked, ["p1"])
    assert scores["recall@1"] == 0.0 and scores["recall@3"] == 1.0 and set(scores) >= {"mrr", "ndcg@10", "hit@20"}


def row(kb: str, lang: str, i: int, recall: float, docs: int = 10) -> dict:
    return {"id": f"{kb}{lang}{i}", "kb": kb, "lang": lang, "recall@10": recall, "mrr": recall, "docs_passed": docs,
            "latency_ms": float(i)}


def test_cells_group_count_and_flag_small_cells() -> None:
    rows = [row("SE", "sv", i, float(i % 2)) for i in range(40)] + [row("SE", "en", i, 1.0) for i in range(5)]
    result = by_cell(rows)
    cells = {(c["kb"], c["lang"]): c for c in result["cells"]}
    assert cells[("SE", "sv")]["n"] == 40 and not cells[("SE", "sv")]["small"]
    assert cells[("SE", "en")]["small"] and cells[("SE", "en")]["recall@10"] == 1.0
    low, high = cells[("SE", "sv")]["recall@10_ci"]
    assert low < 0.5 < high
    assert result["overall"]["n"] == 45 and result["overall"]["latency_ms_p50"] == 17.0  # median of 0..39 and 0..4


def test_bootstrap_interval_narrows_with_n() -> None:
    wide = bootstrap_ci([0, 1] * 10)
    narrow = bootstrap_ci([0, 1] * 500)
    assert wide[1] - wide[0] > narrow[1] - narrow[0]


def test_paired_test_detects_a_consistent_change_only() -> None:
    a = [0.0] * 30 + [1.0] * 30
    assert paired_test(a, a)["p"] == 1.0
    better = paired_test(a, [1.0] * 60)
    assert better["delta"] == 0.5 and better["p"] < 0.001
    noise = paired_test([0, 1] * 15, [1, 0] * 15)
    assert noise["p"] > 0.5


def test_threshold_calibration_stays_within_the_budget() -> None:
    rows = []
    for i in range(20):  # gold at rank 1 with score 0.9, or (every 4th question) at rank 3 with score 0.6
        evidence = [{"doc_id": "x", "score": 0.95}, {"doc_id": "y", "score": 0.7}, {"doc_id": "g", "score": 0.6}] \
            if i % 4 == 0 else [{"doc_id": "g", "score": 0.9}, {"doc_id": "y", "score": 0.5}]
        rows.append({"gold_pages": ["g"], "evidence": evidence, "tags": {"split": "dev"}})
    strict = calibrate_threshold(rows, budget=0.0)
    assert strict["threshold"] == 0.6 and strict["recall_after"] == 1.0 and strict["docs_passed_after"] < 2.5
    loose = calibrate_threshold(rows, budget=0.3)
    assert loose["threshold"] == 0.9 and loose["recall_after"] == 0.75


def test_golden_validation_names_file_line_and_field(tmp_path: Path) -> None:
    good = {"id": "q1", "question": "Var?", "lang": "sv", "kb": "SE", "gold_pages": ["p1"]}
    path = tmp_path / "golden.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "id": "q2", "gold_pages": []}) + "\n")
    with pytest.raises(InputError, match=r"golden.jsonl:2: field 'gold_pages'"):
        load_golden(path)
    path.write_text(json.dumps(good) + "\n" + json.dumps(good) + "\n")
    with pytest.raises(InputError, match=r"golden.jsonl:2: field 'id': duplicate id 'q1'"):
        load_golden(path)
    path.write_text(json.dumps({**good, "surprise": 1}) + "\n")
    with pytest.raises(InputError, match="surprise"):
        load_golden(path)
    path.write_text(json.dumps(good) + "\n")
    assert load_golden(path)[0].as_question().lang == "sv"
