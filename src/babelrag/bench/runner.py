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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from babelrag.bench import swefaq, xquad_cells
from babelrag.bench.ladders import ladder
from babelrag.config import preset_config
from babelrag.errors import InputError
from babelrag.evaluate.calibrate import calibrate_threshold
from babelrag.evaluate.golden import GoldenQuestion, load_golden, save_golden
from babelrag.evaluate.runs import COMPLETE, RunResult, run_config
from babelrag.ingest.pipeline import index_sources
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


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-") or "step"


def run_bench(out: Path, data: Path, quick: bool = False, ladder_name: str = "blog", store: str | None = None,
              seed: int = 13) -> dict[str, Any]:
    started = time.perf_counter()
    store = store or str(home() / "bench" / "store")
    out.mkdir(parents=True, exist_ok=True)
    bench = build_data(data, out / "data", quick, seed)
    ensure_indexes(bench.indexes, store)
    results: dict[str, RunResult] = {}
    calibration: dict[str, Any] = {}
    for number, step in enumerate(ladder(ladder_name), start=1):
        overrides = dict(step.overrides)
        if step.calibrate_threshold_from:
            source = step.calibrate_threshold_from
            calibration.setdefault(source, calibrate_threshold(results[source].rows))
            overrides["threshold"] = round(calibration[source]["threshold"], 6)
        config = preset_config(step.preset, overrides)
        results[step.name] = run_config(step.name, config, bench.golden, out / f"{number:02d}-{_slug(step.name)}", store)
    from babelrag.evaluate.report import comparisons, write_reports

    summary = {"configs": {name: r.metrics for name, r in results.items()},
               "ladder": ladder_name, "runs": {name: r.folder.name for name, r in results.items()},
               "comparisons": comparisons(list(results.values())), "calibration": calibration,
               "data": {"source": str(data), "quick": quick, "seed": seed, "questions": len(bench.golden),
                        "indexes": sorted(bench.indexes), "notes": bench.notes},
               "seconds": time.perf_counter() - started}
    (out / "metrics.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False), encoding="utf-8")
    write_reports(summary, out)
    (out / COMPLETE).write_text(time.strftime("%Y-%m-%dT%H:%M:%S"), encoding="utf-8")
    return summary
