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
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from babelrag.experiments.datasets import Sources, chosen
from babelrag.experiments.ladders import OWN, PROFILES, Step, ladder
from babelrag.experiments.xquad_cells import SplitBy
from babelrag.config import SearchConfig, finding_calls_llm, preset_config
from babelrag.errors import BabelragError, IndexMismatch, InputError
from babelrag.evaluate.calibrate import calibrate_threshold, written
from babelrag.evaluate.golden import GoldenQuestion, load_golden, sample_per_cell, save_golden
from babelrag.evaluate.runs import COMPLETE, RunResult, run_config
from babelrag.ingest.pipeline import IngestOptions, index_sources
from babelrag.kb import KnowledgeBase
from babelrag.models.llm import build_llm
from babelrag.paths import home
from babelrag.store.base import Store, open_store


@dataclass(frozen=True)
class BenchData:
    golden: list[GoldenQuestion]
    indexes: dict[str, Path]  # physical index name → KB JSONL
    notes: list[str]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:10]


def build_data(data: Path, out: Path, quick: bool, seed: int, datasets: list[str] | None = None,
               split_by: SplitBy = "article") -> BenchData:
    """Every registered dataset (``experiments/datasets.py``) whose data is under ``data``, or those named."""
    sources = Sources.locate(data, quick=quick, seed=seed, split_by=split_by)
    if sources.squad is None and sources.faq is None:
        raise InputError(data, None, "no XQuAD-format files (*.<lang>.json) and no swefaq-dev/swefaq_dev.jsonl here")
    built, notes = [], []
    for dataset in chosen(datasets):
        if sources.has(dataset.needs):
            built.append(dataset.build(sources, out / dataset.name))
        else:
            notes.append(f"{dataset.name} ({dataset.layout}) skipped: its data ({', '.join(dataset.needs)}) is not "
                         f"under {data}")
    physical = {name: f"{name}-{_digest(path)}" for b in built for name, path in b["indexes"].items()}
    golden = [q.model_copy(update={"index": physical[q.index or q.kb]})
              for b in built for q in load_golden(b["golden"])]
    if len({q.id for q in golden}) != len(golden):  # a builder's bug: two datasets would share rows
        raise InputError(out, None, "the benchmark datasets wrote the same question id twice")
    save_golden(golden, out / "golden.jsonl")
    return BenchData(golden, {physical[name]: path for b in built for name, path in b["indexes"].items()}, notes)


def ensure_indexes(indexes: dict[str, Path], store: str) -> None:
    """The bench's indexes, each built from the file it is named after (a hash of it)."""
    target = open_store(store)
    for name, source in indexes.items():
        ensure_index(name, [str(source)], target)


def ensure_index(name: str, sources: Sequence[str], store: Store) -> None:
    """A benchmark's index of ``sources``, built once and reused; one built by other component versions (an
    analyzer package upgraded since) is rebuilt rather than refused: it holds nothing but those sources."""
    if stale := needs_rebuilding(name, store):
        print(f"rebuilding bench index {name}: built with other versions of {', '.join(stale)}", file=sys.stderr)
    if stale or not store.exists(name):
        index_sources(name, list(sources), store, IngestOptions(rebuild=bool(stale)))


def needs_rebuilding(name: str, store: Store) -> list[str]:
    """The components a benchmark's existing index was built with other versions of (none: missing or current)."""
    if not store.exists(name):
        return []
    try:
        KnowledgeBase.open(name, store).close()
    except IndexMismatch as mismatch:
        return [field for field, _, _ in mismatch.differences]
    return []


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
                    per_cell: int | None, explicit: bool, per_kb: int | None = None,
                    report_split: str = REPORTED) -> list[GoldenQuestion]:
    """All questions for retrieval steps (the dev split feeds calibration); LLM steps a sample of the
    reported split only, since dev questions never enter the headline figures."""
    calls_model = finding_calls_llm(config) if step.llm is None else step.llm
    if not (step.answer or step.sample or calls_model):
        return golden
    golden = [q for q in golden if q.tags.get("split") == report_split] or golden
    if per_kb is not None:
        return sample_per_cell(golden, per_kb, by_kb=True)
    if quick and not explicit:  # smoke tests; measurements use --llm-per-cell
        return qa_smoke_sample(golden) if step.answer else sample_per_cell(golden, 1, by_kb=True, skip_kbs=("pooled",))
    return sample_per_cell(golden, per_cell)


def fit_profiles(golden: list[GoldenQuestion], indexes: list[str], store: str, folder: Path, wanted: set[str],
                 llm: str | None, llm_per_cell: int) -> list[str]:
    """`babelrag tune` per index on the dev split, into profile files (the bench KBs stay untouched):
    ``no-llm`` (options that call no model) and, when asked for, ``llm`` (≤ 1 call per question, the
    model-calling options measured on ``llm_per_cell`` dev questions per cell). Returns notes."""
    from babelrag.kb import KnowledgeBase
    from babelrag.tune.runner import TuneOptions, tune_or_fall_back, write_profile

    notes = []
    for variant in ("no-llm", "llm"):
        if str(folder / variant) not in wanted:
            continue
        (folder / variant).mkdir(parents=True, exist_ok=True)
        budget = 1.0 if variant == "llm" and not _llm_available(llm or preset_config("chat").llm) else 0.0
        if variant == "llm" and not budget:
            notes.append("tuned profile: no LLM available, so its options are those that call no model")
        for index in indexes:
            target = folder / variant / f"{index}.yaml"
            if target.exists():  # resumed bench: the profile this run already fitted
                continue
            options = TuneOptions(max_llm_calls=budget, llm=llm, store_with_kb=False, llm_per_cell=llm_per_cell)
            with KnowledgeBase.open(index, store) as kb:
                profile, result, fell_back = tune_or_fall_back(kb, golden, options)
            if fell_back:
                notes.append(f"{index} ({variant}): {fell_back}")
            if result is not None and "refit" in result.fit:
                notes.append(f"{index} ({variant}): the shipped relevance model kept, a refit {result.fit['refit']}")
            elif result is not None and "full_refit" in result.fit:
                notes.append(f"{index} ({variant}): relevance model {result.fit['variant']}, a refit of every feature "
                             f"{result.fit['full_refit']}")
            write_profile(profile, target)
    return notes


def _threshold(step: Step, config: SearchConfig, plan_configs: dict[str, SearchConfig], results: dict[str, RunResult],
               golden: list[GoldenQuestion], folder: Path, store: str, concurrency: int | None) -> dict[str, Any]:
    """τ for a step (docs/methods.md#threshold), from dev rows scored by a model that never saw them (the shipped and tuned
    models score their own training questions out-of-fold): the step's *own* dev rows — a run of its
    configuration without a threshold (``OWN``), or an earlier step that is that very configuration —
    else another step's τ, reused and labelled so (an LLM step runs on a test sample only)."""
    plain = config.model_copy(update={"threshold": None})
    source = step.calibrate_threshold_from
    dev = [q for q in golden if q.tags.get("split") == "dev"]
    if not dev:  # a small folder whose articles all hashed into test: nothing may vouch for a cut
        return {"threshold": None, "budget": None, "n": 0, "split": "dev", "from": source, "reused": False,
                "too_few": "no dev questions in this build (every article hashed into the test split)"}
    if source == OWN:
        rows = run_config(f"{step.name} (no threshold, dev)", plain, dev, folder.with_name(folder.name + "-calibration"),
                          store, concurrency=concurrency).rows
        return {**calibrate_threshold(rows, split="dev"), "from": "its own dev rows", "reused": False}
    assert source is not None
    own = plan_configs[source].model_copy(update={"threshold": None}) == plain
    return {**calibrate_threshold(results[source].rows, split="dev"), "from": source, "reused": not own}


def run_bench(out: Path, data: Path, quick: bool = False, ladder_name: str = "blog", store: str | None = None,
              seed: int = 13, llm: str | None = None, llm_per_cell: int | None = None,
              llm_per_kb: int | None = None, concurrency: int | None = None, datasets: list[str] | None = None,
              split_by: SplitBy = "article", report_split: str = REPORTED) -> dict[str, Any]:
    """``llm_per_cell``: questions per cell for the LLM steps (default 20, and 1 for answering ladders);
    ``llm_per_kb``: per knowledge base instead; ``quick`` without either: one question per country KB
    for the LLM steps, two questions for answering. ``concurrency``: questions in flight in every
    step (default: one for retrieval, the model's slots for LLM steps). ``datasets``: dataset or layout
    names (default all); ``split_by``: dev/test by article (new pages) or question (new questions on seen
    pages); ``report_split``: the headline split (``dev`` only to make design choices on)."""
    started = time.perf_counter()
    store = store or str(home() / "bench" / "store")
    steps = ladder(ladder_name)  # an unknown ladder is refused before anything is written
    out.mkdir(parents=True, exist_ok=True)
    bench = build_data(data, out / "data", quick, seed, datasets, split_by)
    answering = any(step.answer for step in steps)
    per_cell = llm_per_cell if llm_per_cell is not None else (1 if answering else 20)
    notes = list(bench.notes)
    plan: list[tuple[int, Step, dict[str, Any], list[GoldenQuestion]]] = []
    plan_configs: dict[str, SearchConfig] = {}
    for number, step in enumerate(steps, start=1):
        overrides = {key: value.replace(PROFILES, str(out / "profiles")) if isinstance(value, str) else value
                     for key, value in dict(step.overrides, **({"llm": llm} if llm else {})).items()}
        config = preset_config(step.preset, overrides)
        calls_model = finding_calls_llm(config) if step.llm is None else step.llm
        if (step.answer or calls_model) and (problem := _llm_available(config.llm)):
            notes.append(f"step '{step.name}' skipped: {problem}")
            continue
        plan_configs[step.name] = config
        plan.append((number, step, overrides, _step_questions(step, config, bench.golden, quick, per_cell,
                                                              llm_per_cell is not None, llm_per_kb, report_split)))
    needed = {q.index for _, _, _, questions in plan for q in questions}
    from babelrag.relevance.model import default_model

    reported = [q.question for q in bench.golden if q.tags.get("split") == report_split]
    if (seen := default_model().fitted_on(reported)) and not default_model().scores_out_of_fold(reported):
        notes.append(f"the shipped relevance model was fitted on {seen} of the reported questions in-sample: its "
                     f"figures are optimistic (another --seed or dev share than the shipped split?)")
    ensure_indexes({name: path for name, path in bench.indexes.items() if name in needed}, store)
    profiles = {str(value) for _, _, overrides, _ in plan for value in overrides.values()
                if isinstance(value, str) and value.startswith(str(out / "profiles"))}
    if profiles:
        notes += fit_profiles(bench.golden, sorted(needed), store, out / "profiles", profiles, llm,
                              2 if quick and llm_per_cell is None else per_cell)
    results: dict[str, RunResult] = {}
    calibration: dict[str, Any] = {}
    split = report_split if any(q.tags.get("split") == report_split for q in bench.golden) else None
    for number, step, overrides, questions in plan:
        folder = out / f"{number:02d}-{_slug(step.name)}"
        if step.calibrate_threshold_from:
            calibration[step.name] = _threshold(step, plan_configs[step.name], plan_configs, results, bench.golden,
                                                folder, store, concurrency)
            tau = calibration[step.name]["threshold"]  # None: too few dev questions vouch for any cut
            overrides = dict(overrides, threshold=None if tau is None else written(tau))
        results[step.name] = run_config(step.name, preset_config(step.preset, overrides), questions, folder, store,
                                        answer=step.answer, report_split=split, concurrency=concurrency)
    from babelrag.evaluate.report import summarise_runs, write_reports

    baselines = {s.name: s.baseline for s in steps if s.baseline and s.name in results and s.baseline in results}
    summary = summarise_runs(
        list(results.values()), ladder=ladder_name, baselines=baselines, calibration=calibration,
        runs={name: r.folder.name for name, r in results.items()},
        data={"source": str(data), "quick": quick, "seed": seed, "questions": len(bench.golden), "split": split,
              "split_by": split_by, "datasets": sorted({q.tags.get("layout", "") for q in bench.golden}),
              "llm": llm, "concurrency": concurrency or "default", "llm_per_cell": per_cell, "llm_per_kb": llm_per_kb, "indexes": sorted(needed),
              "notes": notes},
        seconds=time.perf_counter() - started)
    (out / "metrics.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False), encoding="utf-8")
    write_reports(summary, out)
    (out / COMPLETE).write_text(time.strftime("%Y-%m-%dT%H:%M:%S"), encoding="utf-8")
    return summary
