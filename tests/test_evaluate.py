"""Evaluation logic: answer metrics (docs/methods.md#answer-metrics), retrieval metrics, cells, significance, calibration, golden sets."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from babelrag.errors import ConfigError, InputError
from babelrag.evaluate.answers import (
    answer_language_correct, char3gram_recall, char3grams, flexible_exact_match,
)
from babelrag.evaluate.calibrate import calibrate_threshold
from babelrag.evaluate.cells import by_cell
from babelrag.evaluate.clusters import bootstrap_ci
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
    assert scores["recall@1"] == 0.0 and scores["recall@3"] == 1.0 and set(scores) >= {"mrr", "ndcg@10", "hit@10"}
    # a top-10 list cannot tell recall@20 from recall@10: it is not reported, unless the list is 20 deep
    assert "recall@20" not in scores and "hit@20" not in scores
    assert {"recall@20", "hit@20"} <= set(retrieval_scores(ranked, ["p1"], depth=20))


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
    strict = calibrate_threshold(rows, budget=0.0, new_questions=False)  # the 20 questions' own loss
    assert strict["threshold"] == 0.6 and strict["recall_after"] == 1.0 and strict["docs_passed_after"] < 2.5
    loose = calibrate_threshold(rows, budget=0.3)  # τ 0.9 loses 5 of 20: (5 + 1)/21 = 0.286 for a new one
    assert loose["threshold"] == 0.9 and loose["recall_after"] == 0.75
    assert loose["loss_bound"] == pytest.approx(6 / 21)
    # 0.25 of loss fits a 0.26 budget on these questions, not on new ones: τ stays where nothing is lost
    assert calibrate_threshold(rows, budget=0.26, new_questions=False)["threshold"] == 0.9
    assert calibrate_threshold(rows, budget=0.26)["threshold"] == 0.6
    few = calibrate_threshold(rows, budget=0.005)  # 20 questions vouch for no cut at 0.5 %
    assert few["threshold"] is None and few["recall_after"] == 1.0 and "needs 199" in few["too_few"]


def test_a_written_threshold_never_cuts_the_score_it_was_read_from() -> None:
    from babelrag.evaluate.calibrate import written

    for true_score in (0.1234566, 0.5, 0.0314308, 0.9999996):  # rounding goes up for three of them
        shown = round(true_score, 6)  # what a run row keeps
        assert written(shown) <= true_score and shown - written(shown) < 2e-6


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


def test_retrieval_metrics_agree_with_ir_measures() -> None:
    """An independent implementation on lists with misses, empty lists and several gold pages. (Repeated pages
    — several language versions of one page in the passed list — keep their passage positions in ours, as
    docs/methods.md#retrieval-metrics ranks the list passed on; ir_measures cannot express repeats, see the page-level test above.)"""
    ir_measures = pytest.importorskip("ir_measures")
    from ir_measures import RR, R, nDCG

    rng = __import__("random").Random(7)
    pages = [f"p{i}" for i in range(30)]
    runs = {f"q{n}": rng.sample(pages, rng.randint(0, 25)) for n in range(80)}
    gold = {q: rng.sample(pages, rng.randint(1, 3)) for q in runs}
    qrels = [ir_measures.Qrel(q, page, 1) for q, pages_ in gold.items() for page in pages_]
    scored = [ir_measures.ScoredDoc(q, page, float(len(ranked) - i)) for q, ranked in runs.items()
              for i, page in enumerate(ranked)]
    theirs = {(str(m.measure), m.query_id): m.value for m in
              ir_measures.iter_calc([RR, R @ 1, R @ 5, R @ 10, nDCG @ 10], qrels, scored)}
    for q, ranked in runs.items():
        ours = retrieval_scores(ranked, gold[q])
        for name, measure in (("mrr", "RR"), ("recall@1", "R@1"), ("recall@5", "R@5"), ("recall@10", "R@10"),
                              ("ndcg@10", "nDCG@10")):
            assert ours[name] == pytest.approx(theirs.get((measure, q), 0.0), abs=1e-9), (q, name)


def test_calibration_refuses_to_tune_on_the_questions_it_scores() -> None:
    rows = [{"gold_pages": ["g"], "evidence": [{"doc_id": "g", "score": 0.9}], "tags": {}} for _ in range(5)]
    with pytest.raises(ConfigError, match="leakage"):
        calibrate_threshold(rows)
    assert calibrate_threshold(rows, allow_all=True)["split"] is None  # allowed explicitly, and labelled so


def test_many_cell_tests_are_corrected_and_small_cells_untested() -> None:
    """20 cells of pure noise and one real change: uncorrected, noise cells would pass p < 0.05 by chance."""
    from babelrag.evaluate.significance import compare, correct

    rng = __import__("random").Random(3)
    a, b = [], []
    for cell in range(21):
        for i in range(30):
            base = float(rng.random() < 0.5)
            a.append({"id": f"{cell}-{i}", "kb": f"kb{cell}", "lang": "en", "mrr": base})
            changed = 1.0 if cell == 0 else float(rng.random() < 0.5)
            b.append({"id": f"{cell}-{i}", "kb": f"kb{cell}", "lang": "en", "mrr": changed})
    a.append({"id": "tiny", "kb": "tiny", "lang": "en", "mrr": 0.0})
    b.append({"id": "tiny", "kb": "tiny", "lang": "en", "mrr": 1.0})
    comparison = {"mrr": compare(a, b, "mrr")}
    how = correct([comparison], ["mrr"])
    cells = {c["kb"]: c for c in comparison["mrr"]["cells"]}
    assert how == {"method": "Benjamini–Hochberg", "cell_tests": 21, "overall_tests": 1, "min_pairs": 10}
    assert cells["tiny"]["p"] is None and cells["tiny"]["p_adj"] is None  # one pair: not tested
    assert cells["kb0"]["p_adj"] < 0.05
    assert all(c["p_adj"] >= c["p"] for c in cells.values() if c["p"] is not None)
    noisy = [c for name, c in cells.items() if name not in ("kb0", "tiny")]
    assert all(c["p_adj"] > 0.05 for c in noisy)
    assert cells["kb0"]["mean_a"] < 0.7 and cells["kb0"]["mean_b"] == 1.0  # means on the paired questions


def test_benjamini_hochberg_by_hand() -> None:
    from babelrag.evaluate.significance import adjust

    tests = [{"p": 0.04}, {"p": 0.001}, {"p": 0.02}, {"p": 0.3}, {"p": None}]
    adjust(tests)  # sorted 0.001, 0.02, 0.04, 0.3 (m = 4): min over k ≥ i of p_(k)·m/k, in the input's order
    assert [t["p_adj"] for t in tests[:4]] == pytest.approx([0.16 / 3, 0.004, 0.04, 0.3])
    assert tests[4]["p_adj"] is None  # untested cells stay untested
