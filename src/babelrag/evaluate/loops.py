"""A looping strategy's rounds across a run (CORAL, [CORAL] Figure 3): rounds, where the planner searched
versus where the final evidence came from, how it stopped, and what the agents cost per question.

Read from each question's loop step — the trace stage a strategy that ranks its own evidence declares
(``Facts(paths="own")``) — so any run folder of such a configuration can be summarised again without
re-running it.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import babelrag.strategies  # noqa: F401 - registers the query strategies, whose facts name the loop stages
from babelrag.registry import STRATEGIES

LOOP_STAGES = frozenset(stage for entry in STRATEGIES.entries() if entry.facts.paths == "own"
                        for stage in entry.facts.trace_stages)


def loop_step(row: Mapping[str, Any]) -> dict[str, Any] | None:
    steps = (row.get("trace") or {}).get("steps") or []
    return next((s["data"] for s in steps if s.get("stage") in LOOP_STAGES), None)


def _shares(counts: Counter[str]) -> dict[str, float]:
    total = sum(counts.values())
    return {lang: round(n / total, 4) for lang, n in counts.most_common()} if total else {}


def loop_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """None when the rows are not from a looping strategy."""
    loops = [step for step in map(loop_step, rows) if step is not None]
    if not loops:
        return None
    chosen: Counter[str] = Counter()
    evidence: Counter[str] = Counter()
    rewrites: Counter[str] = Counter()
    for step in loops:
        for entry in step["rounds"]:
            chosen.update(entry.get("corpora") or [])
            if entry.get("rewrite_type") not in (None, "none"):
                rewrites[entry["rewrite_type"]] += 1
        evidence.update(hit[1] for hit in step["evidence"])
    n = len(loops)
    return {"questions": n,
            "rounds_mean": sum(len(s["rounds"]) for s in loops) / n,
            # the round by which the final evidence was all found (the paper's "selected at iteration")
            "evidence_round_mean": _mean([max(hit[3] for hit in s["evidence"]) for s in loops if s["evidence"]]),
            "chosen_langs": _shares(chosen), "evidence_langs": _shares(evidence),
            "rewrites": dict(rewrites), "rewrites_per_question": sum(rewrites.values()) / n,
            "stopped": dict(Counter(s["stopped"] for s in loops)),
            "no_evidence": sum(bool(s["no_evidence"]) for s in loops) / n,
            "validated_mean": sum(s["validated"] for s in loops) / n,
            "agent_tokens_mean": sum(s["agent_tokens"] for s in loops) / n,
            "agent_seconds_mean": sum(s["agent_seconds"] for s in loops) / n}


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None
