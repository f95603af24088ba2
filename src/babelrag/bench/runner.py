"""``babelrag bench``: build the cell benchmarks, index them, run a ladder, write metrics and reports.

The output folder holds ``data/`` (KB JSONL, golden set, recipe), one run folder per ladder
step, the combined ``metrics.json``, ``report.md`` and ``report.html``; ``COMPLETE`` is written
last. Indexes live in a bench store, named by a hash of their JSONL, so identical data is
indexed once and reused across runs.
"""
from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from babelrag.bench import swefaq, xquad_cells
from babelrag.bench.ladders import PROFILES, Step, ladder
from babelrag.config import SearchConfig, preset_config
from babelrag.errors import BabelragError, InputError
from babelrag.evaluate.calibrate import calibrate_threshold, written
from babelrag.evaluate.golden import GoldenQuestion, load_golden, sample_per_cell, save_golden
from babelrag.evaluate.runs import COMPLETE, RunResult, run_config
from babelrag.ingest.pipeline import index_sources
from babelrag.models.llm import build_llm
from babelrag.paths import home
from babelrag.store.base import open_store


@dataclass(frozen=True)
class BenchData:
    golden: list[GoldenQuestion]
    indexes: dict[str, Path]  # physical index name → KB JSONL
    notes: list[str]


def locate(data: Path) -> tuple[Path | None, Path | None]:
    """An XQuAD-format folder (``data`` itself or ``data/xquad-dev``) and a SweFAQ file, when present."""
    squad = data if any(data.glob("*.*.json")) else data / "xquad-dev"
    faq = data / "swefaq-dev" / "swefaq_dev.jsonl"
    return (squad if squad.is_dir() and any(squad.glob("*.*.json")) else None), (faq if faq.is_file() else None)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:10]


def build_data(data: Path, out: Path, quick: bool, seed: int) -> BenchData:
    squad, faq = locate(data)
    if squad is None and faq is None:
        raise InputError(data, None, "no XQuAD-format files (*.<lang>.json) and no swefaq-dev/swefaq_dev.jsonl here")
    built, notes = [], []
    if squad is not None:
        from babelrag.bench.squad import load_squad_folder

        recipe = xquad_cells.default_recipe(load_squad_folder(squad), seed=seed, quick=quick)
        built.append(xquad_cells.build(recipe, out / "xquad-cells"))
    else:
        notes.append(f"no XQuAD-format folder under {data}: xquad-cells skipped")
    if faq is not None:
        built.append(swefaq.build(faq, out / "swefaq"))
    else:
        notes.append(f"no {data}/swefaq-dev/swefaq_dev.jsonl: swefaq skipped")
    physical = {name: f"{name}-{_digest(path)}" for b in built for name, path in b["indexes"].items()}
    golden = [q.model_copy(update={"index": physical[q.index or q.kb]})
              for b in built for q in load_golden(b["golden"])]
    save_golden(golden, out / "golden.jsonl")
    return BenchData(golden, {physical[name]: path for b in built for name, path in b["indexes"].items()}, notes)


def ensure_indexes(indexes: dict[str, Path], store: str) -> None:
    target = open_store(store)
    for name, source in indexes.items():
        if not target.exists(name):
            index_sources(name, [str(source)], target)


REPORTED = "test"  # the split every headline figure is computed on; dev questions tune τ


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-") or "step"


def _llm_available(spec: str) -> str | None:
    """Why the LLM can't be used here, or None when it can."""
    try:
        build_llm(spec)
    except BabelragError as error:
        return str(error)
    return None


def qa_smoke_sample(questions: list[GoldenQuestion], pivot: str = "en") -> list[GoldenQuestion]:
    """Two questions for a QA smoke test that exercise translation: from the country KBs, one asked in a
    non-pivot language whose gold page exists in that language, one whose gold page does not."""
    candidates = sorted((q for q in questions if q.kb != "pooled" and q.lang != pivot
                         and "gold_in_question_lang" in q.tags), key=lambda q: hashlib.sha1(q.id.encode()).hexdigest())
    picked = [next((q for q in candidates if q.tags["gold_in_question_lang"] == flag), None) for flag in ("true", "false")]
    chosen = [q for q in picked if q is not None] or sorted(questions, key=lambda q: q.id)[:2]
    return [q for q in questions if q in chosen]


def _step_questions(step: Step, config: SearchConfig, golden: list[GoldenQuestion], quick: bool,
                    per_cell: int | None, explicit: bool, per_kb: int | None = None) -> list[GoldenQuestion]:
    """All questions for retrieval steps (the dev split feeds calibration); LLM steps a sample of the
    reported split only, since dev questions never enter the headline figures."""
    calls_model = config.query_uses_llm() if step.llm is None else step.llm
    if not (step.answer or step.sample or calls_model):
        return golden
    golden = [q for q in golden if q.tags.get("split") == REPORTED] or golden
    if per_kb is not None:
        return sample_per_cell(golden, per_kb, by_kb=True)
    if quick and not explicit:  # smoke tests; measurements use --llm-per-cell
        return qa_smoke_sample(golden) if step.answer else sample_per_cell(golden, 1, by_kb=True, skip_kbs=("pooled",))
    return sample_per_cell(golden, per_cell)


def fit_profiles(golden: list[GoldenQuestion], indexes: list[str], store: str, folder: Path, wanted: set[str],
                 llm: str | None, llm_per_cell: int) -> list[str]:
    """`babelrag tune` per index on the dev split, into profile files (the bench KBs stay untouched):
    ``no-llm`` (options that call no model) and, when asked for, ``llm`` (≤ 1.5 calls per question, the
    model-calling options measured on ``llm_per_cell`` dev questions per cell). Returns notes."""
    from babelrag.kb import KnowledgeBase
    from babelrag.tune.runner import TooFewQuestions, TuneOptions, tune, write_profile

    notes = []
    for variant in ("no-llm", "llm"):
        if str(folder / variant) not in wanted:
            continue
        (folder / variant).mkdir(parents=True, exist_ok=True)
        budget = 1.5 if variant == "llm" and not _llm_available(llm or preset_config("chat").llm) else 0.0
        if variant == "llm" and not budget:
            notes.append("tuned profile: no LLM available, so its options are those that call no model")
        for index in indexes:
            target = folder / variant / f"{index}.yaml"
            if target.exists():  # resumed bench: the profile this run already fitted
                continue
            options = TuneOptions(max_llm_calls=budget, llm=llm, store_with_kb=False, llm_per_cell=llm_per_cell)
            with KnowledgeBase.open(index, store) as kb:
                try:
                    result = tune(kb, golden, options)
                except TooFewQuestions as error:  # the shipped model, and rules from what dev there is
                    notes.append(f"{index} ({variant}): {error}; tuned with the shipped relevance model instead")
                    result = tune(kb, golden, replace(options, fit_model=False, min_dev=1))
            write_profile(result.profile, target)
    return notes


def run_bench(out: Path, data: Path, quick: bool = False, ladder_name: str = "blog", store: str | None = None,
              seed: int = 13, llm: str | None = None, llm_per_cell: int | None = None,
              llm_per_kb: int | None = None, concurrency: int | None = None) -> dict[str, Any]:
    """``llm_per_cell``: questions per cell for the LLM steps (default 20, and 1 for answering ladders);
    ``llm_per_kb``: per knowledge base instead; ``quick`` without either: one question per country KB
    for the LLM steps, two questions for answering. ``concurrency``: questions in flight in every
    step (default: one for retrieval, the model's slots for LLM steps)."""
    started = time.perf_counter()
    store = store or str(home() / "bench" / "store")
    out.mkdir(parents=True, exist_ok=True)
    bench = build_data(data, out / "data", quick, seed)
    steps = ladder(ladder_name)
    answering = any(step.answer for step in steps)
    per_cell = llm_per_cell if llm_per_cell is not None else (1 if answering else 20)
    notes = list(bench.notes)
    plan: list[tuple[int, Step, dict[str, Any], list[GoldenQuestion]]] = []
    for number, step in enumerate(steps, start=1):
        overrides = {key: value.replace(PROFILES, str(out / "profiles")) if isinstance(value, str) else value
                     for key, value in dict(step.overrides, **({"llm": llm} if llm else {})).items()}
        config = preset_config(step.preset, overrides)
        calls_model = config.query_uses_llm() if step.llm is None else step.llm
        if (step.answer or calls_model) and (problem := _llm_available(config.llm)):
            notes.append(f"step '{step.name}' skipped: {problem}")
            continue
        plan.append((number, step, overrides, _step_questions(step, config, bench.golden, quick, per_cell,
                                                              llm_per_cell is not None, llm_per_kb)))
    needed = {q.index for _, _, _, questions in plan for q in questions}
    from babelrag.relevance.model import default_model

    if seen := default_model().fitted_on([q.question for q in bench.golden if q.tags.get("split") == REPORTED]):
        notes.append(f"the shipped relevance model was fitted on {seen} of the reported questions: its figures "
                     f"are optimistic (another --seed or dev share than the shipped split?)")
    ensure_indexes({name: path for name, path in bench.indexes.items() if name in needed}, store)
    profiles = {str(value) for _, _, overrides, _ in plan for value in overrides.values()
                if isinstance(value, str) and value.startswith(str(out / "profiles"))}
    if profiles:
        notes += fit_profiles(bench.golden, sorted(needed), store, out / "profiles", profiles, llm,
                              2 if quick and llm_per_cell is None else per_cell)
    results: dict[str, RunResult] = {}
    calibration: dict[str, Any] = {}
    split = REPORTED if any(q.tags.get("split") == REPORTED for q in bench.golden) else None
    for number, step, overrides, questions in plan:
        if step.calibrate_threshold_from:
            source = step.calibrate_threshold_from
            calibration.setdefault(source, calibrate_threshold(results[source].rows, split="dev"))
            tau = calibration[source]["threshold"]  # None: too few dev questions vouch for any cut
            overrides = dict(overrides, threshold=None if tau is None else written(tau))
        results[step.name] = run_config(step.name, preset_config(step.preset, overrides), questions,
                                        out / f"{number:02d}-{_slug(step.name)}", store, answer=step.answer,
                                        report_split=split, concurrency=concurrency)
    from babelrag.evaluate.report import summarise_runs, write_reports

    baselines = {s.name: s.baseline for s in steps if s.baseline and s.name in results and s.baseline in results}
    summary = summarise_runs(
        list(results.values()), ladder=ladder_name, baselines=baselines, calibration=calibration,
        runs={name: r.folder.name for name, r in results.items()},
        data={"source": str(data), "quick": quick, "seed": seed, "questions": len(bench.golden), "split": split,
              "llm": llm, "concurrency": concurrency or "default", "llm_per_cell": per_cell, "llm_per_kb": llm_per_kb, "indexes": sorted(needed),
              "notes": notes},
        seconds=time.perf_counter() - started)
    (out / "metrics.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False), encoding="utf-8")
    write_reports(summary, out)
    (out / COMPLETE).write_text(time.strftime("%Y-%m-%dT%H:%M:%S"), encoding="utf-8")
    return summary
