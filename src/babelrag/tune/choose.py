"""Choosing each cell's option and threshold from measured dev results, with shrinkage.

A cell (country × question language) with few dev questions would pick whatever got lucky, so every
choice is made on shrunk means: a cell's mean is pulled toward its KB's (country's) with the
weight of ``prior`` questions, and a KB's toward the global mean the same way. Only cells with at
least ``cell_min`` dev questions get a rule of their own; the others use their KB's rule (or the
global one). Questions are counted as ``clusters.py`` counts them: a KB asked the same question in
three languages has one question's evidence there, not three (its rows are averaged, then weighed as
one question against the prior). Options whose measured LLM calls per question exceed the budget are
never chosen, and ties go to the cheaper option — so a cell where translation does not measurably help makes no call.
A scope takes the simplest option whose shrunk dev objective is within one standard error of the best (the
one-standard-error rule of model selection; simplest: fewest LLM calls, then the parent scope's option, then the
question as written): a cell picks the best of several options on its own dev questions, and the best of several
is flattered by their luck (measured: on a
scattered KB, the English cell's dev winner, the copies alone, gave 0.883 MRR on test against 0.916 for the option
its parent chose). Options are compared on the same questions: when some were measured on a sample only (they call a
model), every option's objective is taken on the questions all of them answered.

The one-standard-error rule guards one comparison, not the best of several: a scope of 30 questions picking among six
options finds one a standard error ahead by luck. So a choice other than the simplest option must also survive the
selection check (``held_out_gain``): the scope's questions halved at random, the same rule run on one half, its
choice scored against the simplest option on the other half, averaged over both directions of many halvings. The
choice stands only where that held-out gain is positive; else the scope takes the simplest option, and its rule
records the choice the check refused and why (measured: on the scattered KB's 30 dev questions, the English pivot
led the question as written by 0.029 against an error of 0.023, on three questions won and two lost; chosen on half
and scored on the other, it lost 0.010).

The threshold of a rule is the largest τ whose expected Recall@k loss on new questions of its scope
stays within the budget (``calibrate_threshold``: (n·loss + 1)/(n + 1) ≤ budget, so 0.005 needs 199
dev questions). A rule whose questions vouch for no cut inherits its parent's τ, lowered to the largest
τ that loses none of its own dev questions: a parent's budget holds on average over its cells, and one
cell's lower scores must not pay for the others' (measured: pooled Arabic lost 3 points of Recall@10 to
a τ from 127 questions). A global rule vouched for by nothing has no threshold.
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from babelrag.errors import shown
from babelrag.evaluate.calibrate import calibrate_threshold, written
from babelrag.evaluate.clusters import cluster_key, clustered_standard_error
from babelrag.strategies.tuned import ANY, OPTIONS, CellRule, SelectionCheck

GLOBAL = "global"
HALVINGS = 50  # random halvings of a scope's questions the selection check averages over (each scored both ways)


@dataclass(frozen=True)
class DevRow:
    """One dev question under one option: its objective, its cost, and its evidence for τ."""

    question: str
    country: str | None
    lang: str
    objective: float
    llm_calls: float
    row: Mapping[str, Any]  # the run row: evidence (doc_id, score) and gold_pages, for thresholds

    def __post_init__(self) -> None:
        # a NaN would lose every comparison in silence (an option dropped, a margin never met): a bug upstream
        if not (math.isfinite(self.objective) and 0.0 <= self.llm_calls < math.inf):
            raise ValueError(f"dev row of question {shown(self.question)}: objective {self.objective} and LLM calls "
                             f"{self.llm_calls} must be finite, the calls not negative")

    @property
    def kb(self) -> str:
        return self.country or ANY

    @property
    def cell(self) -> str:
        return f"{self.kb}|{self.lang}"

    @property
    def sample(self) -> str:
        """The question this row is a version of (its translations share it): what the evidence counts."""
        return cluster_key(self.row, default=self.question)


def questions(rows: Sequence[DevRow]) -> int:
    return len({r.sample for r in rows})


def _within(row: DevRow, scope: str) -> bool:
    return scope in (GLOBAL, row.kb, row.cell)


def _shrink(rows: Sequence[DevRow], parent: float, prior: float) -> float:
    """The rows' mean pulled toward ``parent``, the rows weighing as many questions as they ask."""
    n = questions(rows)
    return (n * float(np.mean([r.objective for r in rows])) + prior * parent) / (n + prior)


def shrunk_objectives(rows: Sequence[DevRow], prior: float) -> dict[str, float]:
    """The option's shrunk mean objective at every scope: ``global``, each KB, each cell."""
    out = {GLOBAL: float(np.mean([r.objective for r in rows]))}
    by_kb: dict[str, list[DevRow]] = defaultdict(list)
    for r in rows:
        by_kb[r.kb].append(r)
    for kb, members in by_kb.items():
        out[kb] = _shrink(members, out[GLOBAL], prior)
        by_cell: dict[str, list[DevRow]] = defaultdict(list)
        for m in members:
            by_cell[m.cell].append(m)
        for cell, cell_rows in by_cell.items():
            out[cell] = _shrink(cell_rows, out[kb], prior)
    return out


def _tau(rows: Sequence[DevRow], budget: float, k: int, new_questions: bool = True) -> float | None:
    """The calibrated τ, or None when no cut keeps the budget (too few questions to vouch for one)."""
    calibration = calibrate_threshold([r.row for r in rows], budget=budget, k=k, split=None, allow_all=True,
                                      new_questions=new_questions)
    return None if calibration["threshold"] is None else written(calibration["threshold"])


def _inherited(rows: Sequence[DevRow], parent_tau: float | None, k: int) -> float | None:
    """The parent's τ, no higher than the largest that keeps every dev question of this scope."""
    if parent_tau is None:
        return None
    own = _tau(rows, 0.0, k, new_questions=False)
    return parent_tau if own is None else min(parent_tau, own)


def rule_choice(order: Sequence[str], value: Mapping[str, float], raw: Mapping[str, float],
                simplest_first: Callable[[str], Any], margin: Callable[[str, str], float]) -> str:
    """The one-standard-error rule: the option with the best ``value`` (any but the cheapest, ``order[0]``, only where
    its ``raw`` objective beats the cheapest's: a scope where translation never helped pays for no call) — unless a
    simpler one (``simplest_first`` sorts) trails it by at most ``margin(leader, option)``: then the simplest such.
    Options ``simplest_first`` ranks alike are taken best first: how they happen to be listed says nothing of which is
    simpler (listed order made the copies alone "simpler" than the copies max-merged with the question). Only an
    exact tie in both keeps ``order``'s order (``choose`` declares it: cost, then ``OPTIONS``' order)."""
    cheapest = order[0]
    eligible = [cheapest] + [o for o in order[1:] if raw[o] > raw[cheapest]]
    leader = max(eligible, key=lambda o: value[o])  # the first best: ties go to the cheaper
    return next(o for o in sorted(eligible, key=lambda o: (simplest_first(o), -value[o]))
                if o == leader or value[leader] - value[o] <= margin(leader, o))


def held_out_gain(rows: Sequence[DevRow], objective: Mapping[str, Mapping[str, float]], order: Sequence[str],
                  simplest_first: Callable[[str], Any], baseline: str, halvings: int = HALVINGS) -> float:
    """What choosing by the rule gains over ``baseline`` on questions it did not choose on: ``rows``' questions (a
    question and its translations together) halved at random, ``rule_choice`` run on one half (its own means, the
    error of its own paired gains), the choice's gain over ``baseline`` taken on the other half, averaged over both
    directions of ``halvings`` halvings (seeded: the same rows give the same answer). A half of one question tells
    no option from another and takes the simplest."""
    samples, codes = np.unique([r.sample for r in rows], return_inverse=True)
    count = len(samples)
    if count < 2:
        raise ValueError("the selection check needs at least two questions")
    position = {option: i for i, option in enumerate(order)}
    values = np.array([[objective[option][r.question] for r in rows] for option in order])  # options × rows
    rng = np.random.default_rng(0)
    gains = []
    for _ in range(halvings):
        first = np.zeros(count, dtype=bool)
        first[rng.permutation(count)[:count // 2]] = True
        in_first = first[codes]
        for chosen_on, asked in ((in_first, count // 2), (~in_first, count - count // 2)):
            means = dict(zip(order, values[:, chosen_on].mean(axis=1)))

            def margin(leader: str, option: str) -> float:
                if asked < 2:  # one question has no error to compare options by
                    return float("inf")
                return clustered_standard_error(values[position[leader], chosen_on] - values[position[option], chosen_on],
                                                codes[chosen_on])
            choice = rule_choice(order, means, means, simplest_first, margin)
            scored_on = ~chosen_on
            gains.append(float(values[position[choice], scored_on].mean() - values[position[baseline], scored_on].mean()))
    return float(np.mean(gains))


def choose(results: Mapping[str, Sequence[DevRow]], costs: Mapping[str, float], max_llm_calls: float,
           cell_min: int = 10, prior: float = 10.0, budget: float = 0.005, k: int = 10,
           selection_check: bool = True) -> tuple[CellRule, dict[str, CellRule], dict[str, CellRule]]:
    """The global rule, the rules per KB (country) and per cell, from each option's dev rows.
    ``costs``: LLM calls per question each option was measured to make (over all dev questions).
    ``selection_check``: False leaves the one-standard-error rule alone, to measure what the check changes."""
    allowed = [o for o in results if costs[o] <= max_llm_calls + 1e-9] or ["as_written"]
    common = set.intersection(*({r.question for r in results[o]} for o in allowed))
    paired = {o: [r for r in results[o] if r.question in common] for o in allowed}
    shrunk = {o: shrunk_objectives(paired[o], prior) for o in allowed}
    raw = {o: shrunk_objectives(paired[o], 0.0) for o in allowed}
    declared = {option: i for i, option in enumerate(OPTIONS)}  # an exact tie's last word, whatever the dict order
    order = sorted(allowed, key=lambda o: (costs[o], o != "as_written", declared.get(o, len(declared))))
    reference = paired[allowed[0]]
    objective = {o: {r.question: r.objective for r in paired[o]} for o in allowed}

    def margin(scope: str, leader: str, option: str) -> float:
        """One standard error of the leader's shrunk dev gain over ``option`` in ``scope``: the paired gain's, a
        question and its translations one sample (``clusters.clustered_standard_error``), times the share of the
        shrunk mean its own ``n`` questions make (n / (n + prior); the parent's part is held fixed); none can be
        told from one question."""
        rows = [r for r in reference if _within(r, scope)]
        samples = [r.sample for r in rows]
        n = len(set(samples))
        if n < 2:
            return float("inf")
        own = 1.0 if scope == GLOBAL else n / (n + prior)
        # the objective is a mean over rows: its error is the cluster-robust one (questions asked in more of the
        # scope's languages weigh more, and their translations do not shrink it)
        return own * clustered_standard_error(
            [objective[leader][r.question] - objective[option][r.question] for r in rows], samples)

    def best(scope: str, inherited: str | None) -> tuple[str, SelectionCheck | None]:
        """The rule's option (``rule_choice`` on shrunk objectives, simplest: cheaper first, then the parent scope's
        option ``inherited``, then the question as written), where it passes the selection check; and what the
        check found, for the profile."""
        def simplest_first(option: str) -> tuple[float, bool, bool]:
            return costs[option], option != inherited, option != "as_written"
        value, own = {o: shrunk[o][scope] for o in allowed}, {o: raw[o][scope] for o in allowed}
        chosen = rule_choice(order, value, own, simplest_first, lambda leader, option: margin(scope, leader, option))
        baseline = rule_choice(order, value, own, simplest_first, lambda *_: float("inf"))  # what it falls back on
        if chosen == baseline or not selection_check:
            return chosen, None
        gain = held_out_gain([r for r in reference if _within(r, scope)], objective, order, simplest_first, baseline)
        if gain > 0:
            return chosen, SelectionCheck(held_out_gain=round(gain, 6), over=baseline)
        return baseline, SelectionCheck(held_out_gain=round(gain, 6), over=baseline, refused=chosen)

    asked_kb, asked_cell = defaultdict(set), defaultdict(set)  # the questions each scope asks
    for r in reference:
        asked_kb[r.kb].add(r.sample)
        asked_cell[r.cell].add(r.sample)
    counts_kb = {kb: len(asked) for kb, asked in asked_kb.items()}
    counts_cell = {cell: len(asked) for cell, asked in asked_cell.items()}

    def rule(scope: str, choice: tuple[str, SelectionCheck | None], source: str, n: int,
             parent_tau: float | None) -> CellRule:
        option, check = choice
        members = [r for r in results[option] if _within(r, scope)]
        if OPTIONS.get(option, {}).get("merge") == "rrf":  # rank-fused: its totals have no fixed meaning, no τ
            tau = None
        else:
            tau = _tau(members, budget, k)
            tau = _inherited(members, parent_tau, k) if tau is None else tau
        return CellRule(option=option, threshold=tau, source=source, n_dev=n, selection_check=check,
                        measured={o: round(shrunk[o].get(scope, float("nan")), 4) for o in allowed})

    global_rule = rule(GLOBAL, best(GLOBAL, None), "global", questions(reference), None)
    kbs = {kb: rule(kb, best(kb, global_rule.option), "kb", n, global_rule.threshold)
           for kb, n in sorted(counts_kb.items()) if n >= cell_min}
    cells = {}
    for cell, n in sorted(counts_cell.items()):
        if n >= cell_min:
            parent = kbs.get(cell.split("|")[0], global_rule)
            cells[cell] = rule(cell, best(cell, parent.option), "cell", n, parent.threshold)
    return global_rule, kbs, cells
