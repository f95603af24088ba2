"""`babelrag tune`'s per-cell choice: dev rows it refuses, shrinkage toward a cell's KB, a question and its
translations as one question of evidence, the one-standard-error rule and its margin, and thresholds that hold
their budget for new questions."""
from __future__ import annotations

import pytest

from babelrag.strategies.tuned import OPTIONS, SelectionCheck
from babelrag.tune.choose import DevRow, choose, held_out_gain, shrunk_objectives

from conftest import dev_rows


@pytest.mark.parametrize("objective, calls", [(float("nan"), 0.0), (float("inf"), 0.0), (0.5, float("nan")),
                                                (0.5, float("inf")), (0.5, -1.0)])
def test_a_dev_row_that_no_comparison_could_rank_is_refused(objective: float, calls: float) -> None:
    # a NaN objective would lose every comparison in silence: the option dropped, a margin never met
    with pytest.raises(ValueError, match="must be finite"):
        DevRow("q1:sv", "SE", "sv", objective, calls, {})


def test_cells_choose_what_their_shrunk_dev_results_favour_within_the_budget() -> None:
    plain = dev_rows({"SE|sv": (20, 0.5, 0), "SE|en": (20, 0.9, 0), "SE|id": (3, 0.5, 0)})
    translated = dev_rows({"SE|sv": (20, 0.8, 1), "SE|en": (20, 0.9, 1), "SE|id": (3, 1.0, 1)})
    results = {"as_written": plain, "as_written+kb_languages": translated}
    costs = {"as_written": 0.0, "as_written+kb_languages": 1.0}
    global_rule, kbs, cells = choose(results, costs, max_llm_calls=1.0, cell_min=10)
    assert cells["SE|sv"].option == "as_written+kb_languages"  # translation measurably helps here
    assert cells["SE|en"].option == "as_written"  # a tie: no LLM call where translation never helps
    assert "SE|id" not in cells and kbs["SE"].option == "as_written+kb_languages"  # 3 questions: the KB's rule
    assert cells["SE|sv"].n_dev == 20 and cells["SE|sv"].source == "cell"
    _, _, no_budget = choose(results, costs, max_llm_calls=0.0, cell_min=10)
    assert {rule.option for rule in no_budget.values()} == {"as_written"}


def test_shrinkage_pulls_small_cells_toward_their_kb() -> None:
    members = dev_rows({"SE|sv": (2, 1.0, 0), "SE|en": (40, 0.5, 0)})
    shrunk = shrunk_objectives(members, prior=10.0)
    assert shrunk["SE|sv"] < 0.7  # two lucky questions are not evidence of a 1.0 cell
    assert abs(shrunk["SE|en"] - 0.5) < 0.02


def test_a_question_asked_in_several_languages_is_one_question_of_evidence() -> None:
    def asked(country: str, langs: tuple[str, ...], count: int, objective: float) -> list[DevRow]:
        return [DevRow(f"{country}{i}:{lang}", country, lang, objective, 0.0,
                       {"id": f"{country}{i}:{lang}", "tags": {"qid": f"{country}{i}"},
                        "evidence": [{"doc_id": "g", "score": 0.9}], "gold_pages": ["g"]})
                for i in range(count) for lang in langs]
    # SE: 4 questions, each asked in three languages (12 rows); PL: 40 questions in one
    members = asked("SE", ("sv", "en", "de"), 4, 1.0) + asked("PL", ("pl",), 40, 0.0)
    shrunk = shrunk_objectives(members, prior=10.0)
    # 4 questions against a prior of 10: (4·1 + 10·12/52)/14 = 0.45 (counting rows would give 0.65)
    assert shrunk["SE"] == pytest.approx((4 + 10 * 12 / 52) / 14)
    global_rule, kbs, cells = choose({"as_written": members}, {"as_written": 0.0}, 0.0, cell_min=10)
    assert global_rule.n_dev == 44 and kbs["PL"].n_dev == 40
    assert "SE" not in kbs  # 4 questions carry no rule of their own, however many languages ask them


def test_a_scope_takes_the_simplest_option_within_one_standard_error_of_the_best() -> None:
    def dev(objectives: list[float], langs: tuple[str, ...] = ("en",), country: str = "SE") -> list[DevRow]:
        """Question i asked in every one of ``langs`` (its versions share a qid), each with ``objectives[i]``."""
        return [DevRow(f"q{i}:{lang}", country, lang, value, 0.0,
                       {"id": f"q{i}:{lang}", "tags": {"qid": f"q{i}"}, "evidence": [{"doc_id": "g", "score": 0.9}],
                        "gold_pages": ["g"]})
                for i, value in enumerate(objectives) for lang in langs]
    costs = {"as_written": 0.0, "as_written+pivot_copies:max": 0.0}
    copies = "as_written+pivot_copies:max"

    def chosen(plain: list[DevRow], other: list[DevRow]) -> tuple[str, ...]:
        global_rule, kbs, cells = choose({"as_written": plain, copies: other}, costs, 0.0)
        return (global_rule.option, kbs["SE"].option, *(rule.option for rule in cells.values()))

    # the copies gain 0.05 a question on average by luck (+0.55 or −0.45), each of 60 questions asked in sv and en:
    # one standard error is 0.065 counted by question (0.046 by row, which would let the copies win)
    lucky = [1.0, 0.0] * 30
    assert set(chosen(dev([0.45] * 60, ("sv", "en")), dev(lucky, ("sv", "en")))) == {"as_written"}
    # the same gain on every question, or a larger one through the same noise (0.15 ± 0.4): the copies
    assert set(chosen(dev([0.45] * 60, ("sv", "en")), dev([0.5] * 60, ("sv", "en")))) == {copies}
    assert set(chosen(dev([0.45] * 60, ("sv", "en")), dev([1.0, 0.2] * 30, ("sv", "en")))) == {copies}
    # a cell whose own questions show no gain keeps the question as written, whatever its KB chose
    both = dev([0.45] * 60, ("sv",)) + dev([0.45] * 60, ("en",))
    better_in_sv = dev([0.9] * 60, ("sv",)) + dev([0.45] * 60, ("en",))
    global_rule, kbs, cells = choose({"as_written": both, copies: better_in_sv}, costs, 0.0)
    assert (kbs["SE"].option, cells["SE|sv"].option, cells["SE|en"].option) == (copies, copies, "as_written")


def test_the_one_error_margin_weighs_each_question_as_the_mean_over_rows_does() -> None:
    """The objective is a mean over rows, so a question asked in three languages weighs three times one asked in one;
    its error must weigh it the same way (the cluster-robust error), not as one cluster mean among equals."""
    def dev(gains: list[float], langs: tuple[str, ...], start: int, base: float = 0.4) -> list[DevRow]:
        return [DevRow(f"q{start + i}:{lang}", "SE", lang, base + gain, 0.0,
                       {"id": f"q{start + i}:{lang}", "tags": {"qid": f"q{start + i}"},
                        "evidence": [{"doc_id": "g", "score": 0.9}], "gold_pages": ["g"]})
                for i, gain in enumerate(gains) for lang in langs]
    copies = "as_written+pivot_copies:max"

    def chosen(widely_asked: list[float], asked_once: list[float]) -> tuple[str, str]:
        plain = dev([0.0] * 20, ("sv", "en", "de"), 0) + dev([0.0] * 40, ("sv",), 20)
        other = dev(widely_asked, ("sv", "en", "de"), 0) + dev(asked_once, ("sv",), 20)
        global_rule, kbs, _ = choose({"as_written": plain, copies: other},
                                     {"as_written": 0.0, copies: 0.0}, 0.0)
        return global_rule.option, kbs["SE"].option
    # the copies' gain is noise on the 20 questions asked in three languages (+0.7 or −0.5), 0 on the 40 asked
    # once: 0.06 over rows, against an error of 0.081 (the error of the 60 question means, 0.046, lets them win;
    # at the KB, both errors times 60/70, the KB's own share of its shrunk mean)
    assert chosen([0.7, -0.5] * 10, [0.0] * 40) == ("as_written", "as_written")
    # a steady 0.03 on the widely asked questions, noise (+0.55 or −0.45) on the others: 0.038 over rows against an
    # error of 0.032 (0.053 from the question means, which keeps the question as written)
    assert chosen([0.03] * 20, [0.55, -0.45] * 20) == (copies, copies)


def test_a_scope_s_margin_is_the_error_of_the_part_of_its_shrunk_gain_its_own_questions_make() -> None:
    """A KB's shrunk gain is 30/40 its own questions' gain and 10/40 its parent's, held fixed: its error is 30/40
    the error of its own questions' gain. The whole error would keep the question as written here."""
    def dev(gains: list[float], country: str) -> list[DevRow]:
        return [DevRow(f"{country}{i}", country, "sv", 0.46 + gain, 0.0,
                       {"id": f"{country}{i}", "tags": {"qid": f"{country}{i}"},
                        "evidence": [{"doc_id": "g", "score": 0.9}], "gold_pages": ["g"]})
                for i, gain in enumerate(gains)]
    copies = "as_written+pivot_copies:max"
    plain = dev([0.0] * 30, "SE") + dev([0.0] * 30, "PL")
    # SE: the copies gain 0.08 through noise (+0.53 or −0.37), one standard error 0.084; PL: a steady −0.02
    other = dev([0.53, -0.37] * 15, "SE") + dev([-0.02] * 30, "PL")
    global_rule, kbs, cells = choose({"as_written": plain, copies: other}, {"as_written": 0.0, copies: 0.0}, 0.0)
    assert global_rule.option == "as_written"  # 0.03 over 60 questions, within its error of 0.042
    # SE's shrunk gain (30·0.08 + 10·0.03)/40 = 0.0675 is above 30/40 of 0.084 (0.063), within the whole 0.084: the
    # rule takes the copies (the selection check then refuses them: a gain of one error does not hold on new halves)
    assert kbs["SE"].selection_check.refused == cells["SE|sv"].selection_check.refused == copies
    assert kbs["PL"].option == "as_written" and kbs["PL"].selection_check is None


def test_a_choice_must_hold_on_dev_questions_it_was_not_chosen_on() -> None:
    """The one-standard-error rule takes a gain that rests on two lucky questions; the selection check (choose on
    half the questions, score on the other half) refuses it, and keeps a gain every question shares."""
    def dev(gains: list[float]) -> list[DevRow]:
        """30 questions at 0.5, the first ``len(gains)`` moved by their gain."""
        return [DevRow(f"q{i}", "SE", "sv", 0.5 + (gains[i] if i < len(gains) else 0.0), 0.0,
                       {"id": f"q{i}", "tags": {"qid": f"q{i}"}, "evidence": [{"doc_id": "g", "score": 0.9}],
                        "gold_pages": ["g"]}) for i in range(30)]
    copies = "as_written+pivot_copies:max"
    costs = {"as_written": 0.0, copies: 0.0}
    # +0.6, +0.6, −0.2: 0.033 ahead against an error of 0.029, all of it from whichever half holds both wins
    lucky, _, _ = choose({"as_written": dev([]), copies: dev([0.6, 0.6, -0.2])}, costs, 0.0)
    assert lucky.option == "as_written" and lucky.selection_check.refused == copies
    assert lucky.selection_check.held_out_gain < 0 and lucky.selection_check.over == "as_written"
    # with the check off (`tune --no-selection-check`, to measure what it changes) the rule's choice stands, unjudged
    unchecked, _, _ = choose({"as_written": dev([]), copies: dev([0.6, 0.6, -0.2])}, costs, 0.0, selection_check=False)
    assert unchecked.option == copies and unchecked.selection_check is None
    # +0.5 twice, no loss (0.033 against 0.023): a half holding one win cannot tell it from luck, a half holding
    # both leaves none for the other; the held-out gain is 0, which is not a gain
    two_wins, _, _ = choose({"as_written": dev([]), copies: dev([0.5, 0.5])}, costs, 0.0)
    assert two_wins.selection_check == SelectionCheck(held_out_gain=0.0, over="as_written", refused=copies)
    steady, _, _ = choose({"as_written": dev([]), copies: dev([0.3] * 4)}, costs, 0.0)
    assert steady.option == copies and steady.selection_check.refused is None
    assert 0 < steady.selection_check.held_out_gain < 0.3 * 4 / 30  # a half's choice is not always right
    # two questions, both gaining 0.3: the rule takes the copies (no error at all), but a half of one question cannot
    # tell them from the question as written, so no half ever chooses them
    pair, _, _ = choose({"as_written": dev([])[:2], copies: dev([0.3, 0.3])[:2]}, costs, 0.0)
    assert pair.selection_check == SelectionCheck(held_out_gain=0.0, over="as_written", refused=copies)
    none_needed, _, _ = choose({"as_written": dev([]), copies: dev([])}, costs, 0.0)
    assert none_needed.option == "as_written" and none_needed.selection_check is None  # nothing beyond the simplest


def test_the_selection_check_keeps_a_questions_translations_on_one_side() -> None:
    """10 questions asked in two languages; the option gains 0.01 on every row but question 0's, whose two versions gain
    +0.31 and −0.29. Halved by question, every half sees each question gain 0.02 in all (no error: it chooses the
    option) and the other half's gain is 0.01 exactly; halved by row, a half holding only the +0.31 picks the option
    for a half holding the −0.29."""
    rows = [DevRow(f"q{i}:{lang}", "SE", lang, 0.5, 0.0, {"id": f"q{i}:{lang}", "tags": {"qid": f"q{i}"}})
            for i in range(10) for lang in ("sv", "en")]
    gains = {r.question: 0.01 for r in rows} | {"q0:sv": 0.31, "q0:en": -0.29}
    objective = {"as_written": {r.question: 0.5 for r in rows},
                 "copies": {r.question: 0.5 + gains[r.question] for r in rows}}

    def simplest_first(option: str) -> tuple[bool]:
        return (option != "as_written",)
    gain = held_out_gain(rows, objective, ["as_written", "copies"], simplest_first, "as_written")
    assert gain == pytest.approx(0.01, abs=1e-12)
    assert held_out_gain(rows, objective, ["as_written", "copies"], simplest_first, "copies") == pytest.approx(0.0)


def test_thresholds_hold_the_budget_for_new_questions_and_per_cell() -> None:
    def dev(cell: str, gold_scores: list[float]) -> list[DevRow]:
        country, lang = cell.split("|")
        return [DevRow(f"{cell}:{i}", country, lang, 1.0, 0.0,
                       {"evidence": [{"doc_id": "x", "score": 0.95}, {"doc_id": "g", "score": s},
                                     {"doc_id": "y", "score": 0.01}], "gold_pages": ["g"]})
                for i, s in enumerate(gold_scores)]
    low_scoring = [0.20 + i / 100 for i in range(10)]  # SE|de: 0.20 … 0.29
    results = {"as_written": dev("SE|sv", [0.6] * 1200) + dev("SE|de", low_scoring) + dev("SE|fi", [0.5] * 10)
               + dev("PL|pl", [0.1] * 60)}
    global_rule, kbs, cells = choose(results, {"as_written": 0.0}, 0.0, cell_min=10, budget=0.005)
    assert cells["SE|sv"].threshold == pytest.approx(0.6, abs=2e-6)  # 1,200 questions vouch for a τ of its own
    # the KB may lose 5 of its 1,220 questions ((5 + 1)/1221 ≤ 0.005): the five lowest, all from SE|de
    assert kbs["SE"].threshold == pytest.approx(0.25, abs=2e-6)
    assert cells["SE|de"].threshold == pytest.approx(0.20, abs=2e-6)  # 10 questions: the KB's τ, below its golds
    assert cells["SE|fi"].threshold == pytest.approx(0.25, abs=2e-6)  # never above the KB's, for its own 0.5s
    assert global_rule.threshold == pytest.approx(0.1, abs=2e-6)  # PL's 60 golds at 0.1 are more than it may lose
    assert kbs["PL"].threshold == cells["PL|pl"].threshold == pytest.approx(0.1, abs=2e-6)  # 60 vouch for none: inherited
    few = {"as_written": dev("SE|sv", [0.6] * 150)}  # 150 < 199: no τ anywhere, not even at the lowest gold
    global_few, kbs_few, _ = choose(few, {"as_written": 0.0}, 0.0, cell_min=10, budget=0.005)
    assert global_few.threshold is None and kbs_few["SE"].threshold is None


def test_a_refused_choice_falls_back_on_the_parent_scope_s_option_when_it_costs_no_more() -> None:
    """The KB takes the copies (max-merged) for a steady +0.1 in both its languages; in Swedish the rank-fused copies
    lead them through two lucky questions. The check scores that lead against the option the cell would otherwise
    inherit, not against the question as written (which every copy beats by 0.1, lucky or not)."""
    def dev(values: list[float], lang: str) -> list[DevRow]:
        return [DevRow(f"q{i}:{lang}", "SE", lang, value, 0.0,
                       {"id": f"q{i}:{lang}", "tags": {"qid": f"q{i}{lang}"}, "evidence": [{"doc_id": "g", "score": 0.9}],
                        "gold_pages": ["g"]}) for i, value in enumerate(values)]
    max_merged, rank_fused = "as_written+pivot_copies:max", "as_written+pivot_copies"
    results = {"as_written": dev([0.5] * 30, "sv") + dev([0.5] * 30, "en"),
               max_merged: dev([0.6] * 30, "sv") + dev([0.6] * 30, "en"),
               rank_fused: dev([1.5, 1.5, 0.4] + [0.6] * 27, "sv") + dev([0.5] * 30, "en")}
    _, kbs, cells = choose(results, {option: 0.0 for option in results}, 0.0)
    assert kbs["SE"].option == max_merged
    assert cells["SE|sv"].option == max_merged
    assert cells["SE|sv"].selection_check.over == max_merged
    assert cells["SE|sv"].selection_check.refused == rank_fused


def _copy_rows(gains: list[float]) -> list[DevRow]:
    """Dev rows of one German question each, at 0.5 moved by its gain."""
    return [DevRow(f"q{i}", None, "de", 0.5 + gain, 0.0,
                   {"id": f"q{i}", "tags": {"qid": f"q{i}"}, "evidence": [{"doc_id": "g", "score": 0.9}],
                    "gold_pages": ["g"]}) for i, gain in enumerate(gains)]


@pytest.mark.parametrize("leading", ["pivot_copies", "as_written+pivot_copies:max"])
def test_options_equally_simple_are_taken_best_first_not_in_listed_order(leading: str) -> None:
    """The copies alone and the copies max-merged with the question cost the same and neither is the question as
    written: the rule has no reason to call either simpler, so within one error of each other it takes the better,
    whichever is listed first (listed order once took the copies alone: measured on the scattered KB with the 1.5B
    model's copies, the max-merged ones led on dev by 0.007 and on test by 0.021)."""
    trailing = next(o for o in ("pivot_copies", "as_written+pivot_copies:max") if o != leading)
    results = {"as_written": _copy_rows([0.0] * 30), "pivot_copies": [], "as_written+pivot_copies:max": []}
    results[trailing], results[leading] = _copy_rows([0.0, 0.18] * 15), _copy_rows([0.1] * 30)
    costs = dict.fromkeys(results, 0.0)
    # the leader is 0.01 ahead of the other within its error (0.017), and 0.1 ahead of the question as written
    global_rule, _, _ = choose(results, costs, 0.0)
    assert global_rule.option == leading and global_rule.selection_check.over == "as_written"


def test_an_exact_tie_between_options_equally_simple_goes_to_the_one_declared_first() -> None:
    """Equal in cost and in every dev value, the copies alone (one path, declared first in ``OPTIONS``) win over the
    copies max-merged with the question, however the results happen to be ordered."""
    copies, merged = "pivot_copies", "as_written+pivot_copies:max"
    assert list(OPTIONS).index(copies) < list(OPTIONS).index(merged)
    for results in ({"as_written": _copy_rows([0.0] * 30), merged: _copy_rows([0.1] * 30),
                     copies: _copy_rows([0.1] * 30)},
                    {copies: _copy_rows([0.1] * 30), "as_written": _copy_rows([0.0] * 30),
                     merged: _copy_rows([0.1] * 30)}):
        global_rule, _, _ = choose(results, dict.fromkeys(results, 0.0), 0.0)
        assert global_rule.option == copies


@pytest.mark.parametrize("checked", [True, False])
def test_the_summary_says_what_the_check_found_and_when_it_was_off(checked: bool) -> None:
    """A rule the check judged shows its held-out gain and what it refused; with `tune --no-selection-check` every rule
    reads "off", not "–" (which says the rule took the simplest option and needed no check)."""
    from babelrag.relevance.model import default_model
    from babelrag.strategies.tuned import CellRule, Profile
    from babelrag.tune.runner import TuneResult, summary_lines

    judged = CellRule(option="as_written", n_dev=30, selection_check=SelectionCheck(
        held_out_gain=-0.01, over="as_written", refused="as_written+pivot")) if checked else \
        CellRule(option="as_written+pivot", n_dev=30)
    profile = Profile(kb="demo", embedder="e5", global_rule=judged, kbs={"SE": CellRule(option="as_written", n_dev=30)},
                      budget={"selection_check": checked})
    rows = [line for line in summary_lines(TuneResult(profile, default_model(), {}, 30, 30)) if line.startswith("| ")]
    checks = [row.rstrip(" |").rsplit("| ", 1)[1] for row in rows[1:]]
    if checked:
        assert checks == ["refused as_written+pivot: -0.010 over as_written on held-out halves", "–"]
    else:
        assert checks == ["off", "off"]


def test_the_summary_says_which_refit_was_left_untried_and_why() -> None:
    """With too few dev articles a refit is not tried: the summary says so, not a cross-validation that never ran."""
    from babelrag.relevance.model import default_model
    from babelrag.strategies.tuned import CellRule, Profile
    from babelrag.tune.runner import TuneResult, summary_lines

    profile = Profile(kb="demo", embedder="e5", global_rule=CellRule(option="as_written", n_dev=30))
    kept = {"variant": "shipped",
            "refit": "not tried: the dev questions come from 3 articles, and a refit competes from 30"}
    lines = summary_lines(TuneResult(profile, default_model(), kept, 30, 30))
    assert lines[2] == ("Relevance model: the shipped one, a refit not tried: the dev questions come from 3 articles, "
                        "and a refit competes from 30.")
    fitted = summary_lines(TuneResult(profile, default_model(), {"variant": "full", "best": "full"}, 30, 30))
    assert fitted[2].startswith("Relevance model: full (cross-validated MRR on dev: –;")
    assert "refit of every feature" not in fitted[2]
    hybrid_only = {"variant": "hybrid", "best": "hybrid", "cv_mrr": {"shipped": 0.9, "hybrid": 0.95},
                   "full_refit": "not tried: the dev questions come from 8 articles, and it competes from 30"}
    lines = summary_lines(TuneResult(profile, default_model(), hybrid_only, 30, 30))
    assert lines[2].startswith("Relevance model: hybrid (cross-validated MRR on dev: {'shipped': 0.9, 'hybrid': 0.95};")
    assert lines[2].endswith(" A refit of every feature was not tried: the dev questions come from 8 articles, and it "
                             "competes from 30.")
    assert "), fitted on 30 dev rows (30 questions)." in lines[2]
    shipped = summary_lines(TuneResult(profile, default_model(), {**hybrid_only, "variant": "shipped"}, 30, 30))
    assert "), chosen on 30 dev rows (30 questions)." in shipped[2]  # the shipped model is not fitted on them
