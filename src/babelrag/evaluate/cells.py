"""Aggregation by cell (knowledge base × question language) and overall, with bootstrap CIs.

An overall mean hides the cells that fail; every metric is reported per cell with its n, a
percentile-bootstrap 95% interval, and a flag when the cell is too small to move on (fewer than 30
questions). n is counted twice: rows (question × language × KB as asked) and questions (a question
and its translations are one, ``clusters.py``); intervals resample questions, never rows, and the
headline interval is also given resampling gold pages, the unit of claims about documents.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from babelrag.evaluate.clusters import bootstrap_ci, bootstrap_gap_ci, cluster_keys

SMALL_CELL = 30
# Averaged per question; latency gets percentiles instead, LLM costs are per-question means.
MEAN_METRICS = ("recall@1", "recall@3", "recall@5", "recall@10", "recall@20", "hit@1", "hit@3", "hit@5",
                "hit@10", "hit@20", "mrr", "ndcg@10", "docs_passed", "llm_calls", "llm_tokens", "llm_seconds",
                "llm_cached", "failed", "failures")
ANSWER_METRICS = ("answer_char3", "answer_em", "answer_lang_ok", "answer_lang_unclassified", "answer_no_reference")
# per question: retrieval_ms leaves out model calls, model_ms is their original cost, latency_ms the sum
TIMINGS = ("latency_ms", "retrieval_ms", "model_ms")
CI_METRICS = ("recall@10", "mrr", "docs_passed", "answer_char3")
PAGE_CI_METRICS = ("mrr",)  # resampled by gold page too: how sure a figure is about *other pages*


def summarise(rows: Sequence[Mapping[str, Any]], seed: int = 0) -> dict[str, Any]:
    """Means of every per-question metric present, latency percentiles, CIs for the headline metrics;
    ``n`` rows, ``questions`` and ``pages`` the independent units behind them."""
    questions, pages = cluster_keys(rows, "question"), cluster_keys(rows, "page")
    out: dict[str, Any] = {"n": len(rows), "questions": len(set(questions)), "pages": len(set(pages))}
    for metric in MEAN_METRICS + ANSWER_METRICS:
        values = [r[metric] for r in rows if r.get(metric) is not None]
        if values:
            out[metric] = float(np.mean(values))
    for timing in TIMINGS:
        values = [r[timing] for r in rows if timing in r]
        if values:
            out[f"{timing}_p50"] = float(np.percentile(values, 50))
            out[f"{timing}_p95"] = float(np.percentile(values, 95))
    stages = Counter(stage for r in rows for stage in r.get("failure_stages") or ())
    if stages:
        out["failure_stages"] = dict(stages.most_common())
    for metric in CI_METRICS:
        scored = [(r[metric], q, p) for r, q, p in zip(rows, questions, pages) if r.get(metric) is not None]
        if scored:
            values = [v for v, _, _ in scored]
            out[f"{metric}_ci"] = list(bootstrap_ci(values, [q for _, q, _ in scored], seed))
            if metric in PAGE_CI_METRICS:
                out[f"{metric}_ci_pages"] = list(bootstrap_ci(values, [p for _, _, p in scored], seed))
    return out


def gold_language_split(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Rows whose gold page exists in the question's language (``tags.gold_in_question_lang``) apart from
    those whose gold is only in other languages; rows without the tag are in neither."""
    split: dict[str, list[Mapping[str, Any]]] = {"gold_in_lang": [], "gold_elsewhere": []}
    for row in rows:
        flag = (row.get("tags") or {}).get("gold_in_question_lang")
        if flag in ("true", "false"):
            split["gold_in_lang" if flag == "true" else "gold_elsewhere"].append(row)
    return split


def by_layout(rows: Sequence[Mapping[str, Any]], seed: int = 0) -> dict[str, Any]:
    """Per layout (``tags.layout``: parallel, scattered, …): all its rows, and them split by where the gold
    page is — the same question should find its page whatever language the page is written in."""
    groups: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[(row.get("tags") or {}).get("layout") or "untagged"].append(row)
    out: dict[str, Any] = {}
    for layout, members in sorted(groups.items()):
        parts = {name: part for name, part in gold_language_split(members).items() if part}
        out[layout] = {"all": summarise(members, seed), **{name: summarise(part, seed) for name, part in parts.items()}}
        if len(parts) == 2 and (gap := language_gap_summary(parts["gold_in_lang"], parts["gold_elsewhere"], seed)):
            out[layout]["gap"] = gap
    return out


def language_gap_summary(inside: Sequence[Mapping[str, Any]], elsewhere: Sequence[Mapping[str, Any]],
                         seed: int = 0) -> dict[str, Any]:
    """The language gap (MRR with the gold page in the question's language − MRR with it elsewhere) with a 95 %
    interval resampling questions across both sides at once, so that a small sample's gap is read with its noise,
    and one resampling gold pages (which side a question is on is its page's doing). Empty without an MRR on both
    sides."""
    scored = [(row, side) for side, rows in ((True, inside), (False, elsewhere)) for row in rows
              if row.get("mrr") is not None]
    if len({side for _, side in scored}) < 2:
        return {}
    rows, sides = [row for row, _ in scored], [side for _, side in scored]
    values = [row["mrr"] for row in rows]
    gap = float(np.mean([v for v, s in zip(values, sides) if s]) - np.mean([v for v, s in zip(values, sides) if not s]))
    return {"mrr": gap, "mrr_ci": list(bootstrap_gap_ci(values, sides, cluster_keys(rows, "question"), seed)),
            "mrr_ci_pages": list(bootstrap_gap_ci(values, sides, cluster_keys(rows, "page"), seed))}


def by_cell(rows: Iterable[Mapping[str, Any]], seed: int = 0) -> dict[str, Any]:
    """``{"overall": {...}, "cells": [{"kb", "lang", "n", "questions", metrics..., "small"}], "gold": {...},
    "layouts": {...}}`` in a stable order; ``gold`` splits the overall figures by where the gold page is
    (when tagged), ``layouts`` gives each layout's figures and their gold split."""
    rows = list(rows)
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[(row["kb"], row["lang"])].append(row)
    cells = []
    for (kb, lang), members in sorted(groups.items()):
        cell = {"kb": kb, "lang": lang, **summarise(members, seed)}
        cell["small"] = cell["questions"] < SMALL_CELL
        cells.append(cell)
    out: dict[str, Any] = {"overall": summarise(rows, seed), "cells": cells}
    gold = {name: summarise(members, seed) for name, members in gold_language_split(rows).items() if members}
    if gold:
        out["gold"] = gold
    if any((row.get("tags") or {}).get("layout") for row in rows):
        out["layouts"] = by_layout(rows, seed)
    return out
