"""Reports over one or more runs: a Markdown summary and a self-contained HTML cell matrix.

The HTML page embeds its data and code (no network, no build step): rows are knowledge bases,
columns question languages; step through configurations or play them, switch the metric, hover
a cell for its n, interval and change from the step's baseline (BH-adjusted p).
"""
from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np

from babelrag.errors import ConfigError, RunUnreadable
from babelrag.evaluate.report_layouts import layout_figure, layout_lines
from babelrag.evaluate.runs import RunResult, in_split, load_run
from babelrag.evaluate.significance import compare, correct

RETRIEVAL_METRICS = ("recall@10", "mrr", "docs_passed")
ANSWER_METRICS = ("answer_char3", "answer_em", "answer_lang_ok")
TESTED_METRICS = ("recall@10", "mrr", "answer_char3", "answer_em")
SIGNIFICANT = 0.05


def headline_rows(result: RunResult) -> list[dict[str, Any]]:
    """The rows a run's headline metrics cover (its reported split; dev questions used for tuning stay out)."""
    return in_split(result.rows, result.metrics.get("split"))


def _median_ratio(mine: list[dict[str, Any]], theirs: list[dict[str, Any]], timing: str) -> float | None:
    if not mine or not all(timing in r for r in mine + theirs):
        return None
    return float(np.median([r[timing] for r in mine]) / max(float(np.median([r[timing] for r in theirs])), 1e-9))


def comparisons(results: list[RunResult], baselines: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Each configuration against its baseline (default: the previous one) on the questions both ran:
    paired randomisation tests per cell and overall on every metric both have, and the median
    latency ratios over those same questions. Tests are corrected afterwards (``correct``)."""
    by_name = {r.name: r for r in results}
    out = []
    for index, b in enumerate(results[1:], start=1):
        a = by_name.get((baselines or {}).get(b.name, ""), results[index - 1])
        rows_a, rows_b = headline_rows(a), headline_rows(b)
        ids = {r["id"] for r in rows_a} & {r["id"] for r in rows_b}
        mine, theirs = [r for r in rows_b if r["id"] in ids], [r for r in rows_a if r["id"] in ids]
        out.append({"from": a.name, "to": b.name, "n": len(ids),
                    "ratios": {t: _median_ratio(mine, theirs, t) for t in ("retrieval_ms", "latency_ms")},
                    **{m: compare(rows_a, rows_b, m) for m in TESTED_METRICS
                       if any(m in r for r in rows_a) and any(m in r for r in rows_b)}})
    return out


def summarise_runs(results: list[RunResult], **extra: Any) -> dict[str, Any]:
    """Everything a report shows, computed from the runs themselves (nothing is carried that could go
    stale); ``extra["baselines"]`` names each step's baseline (default: the previous step)."""
    tests = comparisons(results, extra.get("baselines"))
    return {"configs": {r.name: r.metrics for r in results}, "comparisons": tests,
            "correction": correct(tests, TESTED_METRICS), **extra}


def _answering(summary: dict[str, Any]) -> bool:
    return any("answer_char3" in cfg["overall"] for cfg in summary["configs"].values())


def load_summary(folders: list[Path]) -> dict[str, Any]:
    """Bench folders (several configurations) and single eval runs, combined in the order given."""
    results: list[RunResult] = []
    extra: dict[str, Any] = {}
    baselines: dict[str, str] = {}
    for folder in folders:
        metrics_file = folder / "metrics.json"
        if not metrics_file.exists():
            raise ConfigError(f"{folder}: no metrics.json (not a run folder)")
        try:  # a damaged or foreign run file is that run's refusal, not a crash of whoever reads it
            metrics = json.loads(metrics_file.read_text(encoding="utf-8"))
            if "runs" in metrics:
                results.extend(load_run(folder / sub) for sub in metrics["runs"].values())
                extra = {k: metrics[k] for k in ("calibration", "data", "ladder", "seconds") if k in metrics}
                baselines.update(metrics.get("baselines") or {})
            else:
                results.append(load_run(folder))
        except (ValueError, KeyError, TypeError, AttributeError) as error:  # JSONDecodeError is a ValueError
            raise RunUnreadable(folder.name, f"run files: {type(error).__name__}: {error}") from error
    names = [r.name for r in results]
    if len(set(names)) != len(names):
        results = [RunResult(f"{r.name} ({r.folder.name})", r.folder, r.rows, r.metrics) for r in results]
    return summarise_runs(results, **extra, baselines=baselines)


def _fmt(value: Any, metric: str = "") -> str:
    if value is None:
        return "–"
    if metric in ("failed",):
        return f"{value:.0%}"
    return f"{value:.1f}" if metric.startswith(("docs", "latency", "retrieval", "model", "llm")) else f"{value:.3f}"


def _cell_key(cell: dict[str, Any]) -> tuple[str, str]:
    return cell["kb"], cell["lang"]


def _p(test: dict[str, Any]) -> str:
    return f"p={test['p']:.3f}, adj. {test['p_adj']:.3f}" if test.get("p_adj") is not None else "untested"


def _significant(test: dict[str, Any]) -> bool:
    return test.get("p_adj") is not None and test["p_adj"] < SIGNIFICANT


def _overall_lines(summary: dict[str, Any], columns: list[str]) -> list[str]:
    configs = summary["configs"]
    splits = {cfg.get("split") for cfg in configs.values()}
    timing = {cfg.get("timing", {}).get("how") for cfg in configs.values()} - {None}
    lines = ["## Overall", ""]
    if splits - {None}:
        lines.append(f"Questions of the **{', '.join(sorted(s for s in splits if s))}** split only: the dev questions "
                     "(used to tune τ) are reported apart below, never in these figures.")
    lines += [f"Timing — {how}." for how in sorted(timing)]
    lines += ["Steps that call an LLM run on a sample: compare them on the matched table below, not here.", "",
              "| configuration | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for name, cfg in configs.items():
        overall = cfg["overall"]
        cells = [count(overall) if c == "n" else _fmt(overall.get(c), c) for c in columns]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    seen = {name: cfg["seen"] for name, cfg in configs.items() if cfg.get("seen")}
    for name, what in seen.items():
        lines.append(f"- {name}: {what['n']} rows left out of these figures — " +
                     "; ".join(f"{n} because {why}" for why, n in what["why"].items()) + ".")
    excluded = {name: cfg["excluded"] for name, cfg in configs.items() if cfg.get("excluded")}
    if excluded:
        lines += ["", "Questions outside the headline (the dev split, used for tuning and τ, and any question the "
                      "configuration was tuned or fitted on; shown apart, not comparable with the table above):", "",
                  "| configuration | n | recall@10 | mrr | docs_passed |", "|---|---|---|---|---|"]
        for name, rest in excluded.items():
            o = rest["overall"]
            lines.append(f"| {name} | {count(o)} | {_fmt(o.get('recall@10'))} | {_fmt(o.get('mrr'))} | "
                         f"{_fmt(o.get('docs_passed'), 'docs')} |")
    return lines


def count(summary: dict[str, Any]) -> str:
    """n as the independent questions and the rows behind them ("127 q / 1,016 rows")."""
    return f"{summary.get('questions', summary['n']):,} q / {summary['n']:,} rows"


def _matched_lines(summary: dict[str, Any], metrics: list[str]) -> list[str]:
    lines = ["", "## Each step against its baseline, on the same questions", "",
             "Means over the questions both steps ran (matched by id); ratios of median times over the same "
             "questions under the same timing.", "",
             "| step | baseline | n | " + " | ".join(f"{m} (baseline → step)" for m in metrics) +
             " | retrieval × | latency × |", "|---" * (len(metrics) + 5) + "|"]
    for c in summary["comparisons"]:
        values = [f"{c[m]['overall']['mean_a']:.3f} → {c[m]['overall']['mean_b']:.3f}" if m in c else "–"
                  for m in metrics]
        ratios = [f"{c['ratios'][t]:.2f}×" if c["ratios"].get(t) is not None else "–"
                  for t in ("retrieval_ms", "latency_ms")]
        lines.append(f"| {c['to']} | {c['from']} | {c['n']} | " + " | ".join(values + ratios) + " |")
    return lines


def markdown(summary: dict[str, Any]) -> str:
    configs = summary["configs"]
    names = list(configs)
    answering = _answering(summary)
    columns = ["n", "recall@10", "recall@1", "mrr", "ndcg@10", "docs_passed", "retrieval_ms_p50", "model_ms_p50",
               "llm_calls", "llm_tokens", "failed"]
    if answering:
        columns[1:1] = ["answer_char3", "answer_em", "answer_lang_ok", "answer_lang_unclassified"]
    matrix = "answer_char3" if answering else "recall@10"
    lines = ["# babelrag — " + ("answers" if answering else "retrieval") + " by cell", ""]
    data = summary.get("data")
    if data:
        lines += [f"Data: `{data['source']}` ({'quick sample' if data['quick'] else 'full'}, seed {data['seed']}, "
                  f"{data['questions']} golden rows; layouts {', '.join(data.get('datasets') or []) or '–'}; dev/test "
                  f"split by {data.get('split_by', 'question')}, headline on the {data.get('split') or 'whole'} "
                  f"split).", *[f"- note: {n}" for n in data.get("notes", [])], ""]
    lines += _overall_lines(summary, columns)
    for step, calibration in summary.get("calibration", {}).items():
        source = calibration.get("from", step)
        how = (f"reused from `{source}` (calibrated on its dev rows, not this step's own)" if calibration.get("reused")
               else f"calibrated on `{source}`" if source != step else "calibrated on its own dev rows")
        head = (f"`{step}`: threshold {how} ({calibration['split'] or 'all'} split, n = {calibration['n']} questions"
                + (f", {calibration['rows']} rows" if calibration.get("rows") else "") + ")")
        if calibration["threshold"] is None:
            lines += ["", f"{head}: no cut — {calibration.get('too_few') or 'none keeps the Recall@10 budget'}."]
            continue
        bound = calibration.get("loss_bound")
        lines += ["", f"{head}: τ = {calibration['threshold']:.4f}, Recall@10 "
                      f"{calibration['recall_before']:.3f} → {calibration['recall_after']:.3f}, docs passed "
                      f"{calibration['docs_passed_before']:.1f} → {calibration['docs_passed_after']:.1f}"
                      + (f"; expected loss on new questions ≤ {bound:.4f} (budget {calibration['budget']})"
                         if bound is not None else "") + "."]
    if summary["comparisons"]:
        lines += _matched_lines(summary, [m for m in ("recall@10", "mrr", "answer_char3") if answering or m != "answer_char3"])
    kbs = sorted({c["kb"] for cfg in configs.values() for c in cfg["cells"]})
    langs = sorted({c["lang"] for cfg in configs.values() for c in cfg["cells"]})
    for name in names:
        cells = {_cell_key(c): c for c in configs[name]["cells"]}
        lines += ["", f"## {name}: {matrix} by cell (n; * = fewer than 30 questions; ! = failure rate)", "",
                  "| KB | " + " | ".join(langs) + " |", "|---" * (len(langs) + 1) + "|"]
        for kb in kbs:
            row = []
            for lang in langs:
                cell = cells.get((kb, lang))
                failed = f" !{cell['failed']:.0%}" if cell and cell.get("failed") else ""
                row.append("not asked" if cell is None else
                           f"{_fmt(cell.get(matrix))} ({cell.get('questions', cell['n'])}{'*' if cell['small'] else ''})"
                           f"{failed}")
            lines.append(f"| {kb} | " + " | ".join(row) + " |")
        ranked = sorted(cells.values(), key=lambda c: (c.get(matrix, 0.0), c.get("mrr", 0.0)))
        worst = ", ".join(f"{c['kb']}/{c['lang']} {_fmt(c.get(matrix))}" for c in ranked[:3])
        best = ", ".join(f"{c['kb']}/{c['lang']} {_fmt(c.get(matrix))}" for c in ranked[::-1][:3])
        lines += ["", f"Worst cells: {worst}. Best cells: {best}."]
        stages = configs[name]["overall"].get("failure_stages")
        if stages:
            lines.append("Model failures (each took its method's fallback): " +
                         ", ".join(f"{stage} {count}" for stage, count in stages.items()) + ".")
    lines += layout_lines(configs)
    lines += _loop_lines(configs)
    correction = summary.get("correction") or {}
    lines += ["", f"## Significant changes (paired randomisation test; {correction.get('method', 'uncorrected')} "
                  f"adjusted p < {SIGNIFICANT})", "",
              f"Each step against its baseline. Corrected over {correction.get('cell_tests', 0)} per-cell tests (one "
              f"family) and {correction.get('overall_tests', 0)} overall tests (another); cells with fewer than "
              f"{correction.get('min_pairs', '?')} paired questions are not tested.", ""]
    found = False
    for comparison in summary["comparisons"]:
        for metric in (m for m in TESTED_METRICS if m in comparison):
            test = comparison[metric]
            changed = [c for c in test["cells"] if _significant(c)]
            overall = test["overall"]
            if _significant(overall) or changed:
                found = True
                cells_text = ", ".join(f"{c['kb']}/{c['lang']} {c['delta']:+.3f} ({_p(c)})" for c in changed)
                lines.append(f"- {comparison['from']} → {comparison['to']}, {metric}: overall "
                             f"{overall['delta']:+.3f} ({_p(overall)})" + (f"; cells: {cells_text}" if changed else ""))
    if not found:
        lines.append("- none")
    return "\n".join(lines) + "\n"


def _mix(shares: dict[str, float]) -> str:
    return ", ".join(f"{lang} {share:.0%}" for lang, share in shares.items()) or "–"


def _loops(configs: dict[str, Any]) -> dict[str, Any]:
    """Each looping configuration's loop summary (``"coral"``: the key of run folders written before the
    summary was read from the strategy's facts)."""
    loops = {name: cfg["overall"].get("loop") or cfg["overall"].get("coral") for name, cfg in configs.items()}
    return {name: loop for name, loop in loops.items() if loop}


def _loop_lines(configs: dict[str, Any]) -> list[str]:
    """A looping strategy's rounds per configuration: where it searched vs where its evidence came from, cost."""
    loops = _loops(configs)
    if not loops:
        return []
    lines = ["", "## Strategy loop", "", "Languages the planner chose (share of corpus selections) against the languages of "
             "the final evidence; agent tokens and model seconds per question.", "",
             "| configuration | rounds | evidence by round | rewrites/q | validated | no evidence | chosen corpora "
             "| final evidence | stopped | agent tokens | agent s |", "|---" * 11 + "|"]
    for name, loop in loops.items():
        by_round = loop.get("evidence_round_mean")
        stopped = ", ".join(f"{why} {count}" for why, count in loop["stopped"].items())
        lines.append(f"| {name} | {loop['rounds_mean']:.2f} | {'–' if by_round is None else f'{by_round:.2f}'} | "
                     f"{loop['rewrites_per_question']:.2f} | {loop['validated_mean']:.1f} | {loop['no_evidence']:.0%} | "
                     f"{_mix(loop['chosen_langs'])} | {_mix(loop['evidence_langs'])} | {stopped} | "
                     f"{loop['agent_tokens_mean']:.0f} | {loop['agent_seconds_mean']:.1f} |")
    return lines


def loop_figure(configs: dict[str, Any], out: Path) -> Path | None:
    """[CORAL] Figure 3: per configuration, the language mix of chosen corpora next to that of the evidence."""
    loops = _loops(configs)
    if not loops:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    langs = sorted({lang for loop in loops.values() for key in ("chosen_langs", "evidence_langs") for lang in loop[key]})
    bars = [(f"{name}\nchosen", loop["chosen_langs"]) for name, loop in loops.items()] + \
           [(f"{name}\nevidence", loop["evidence_langs"]) for name, loop in loops.items()]
    bars.sort(key=lambda bar: bar[0])
    figure, axes = plt.subplots(figsize=(1.4 * len(bars) + 2, 4))
    bottoms = [0.0] * len(bars)
    colours = plt.get_cmap("tab20")
    for index, lang in enumerate(langs):
        heights = [shares.get(lang, 0.0) for _, shares in bars]
        axes.bar([label for label, _ in bars], heights, bottom=bottoms, label=lang, color=colours(index % 20))
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    axes.set_ylabel("share")
    axes.set_title("Corpus languages chosen vs languages of the final evidence")
    axes.legend(loc="center left", bbox_to_anchor=(1, 0.5), fontsize="small")
    axes.tick_params(axis="x", labelsize="small")
    figure.tight_layout()
    path = out / "coral-languages.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def html_data(summary: dict[str, Any]) -> dict[str, Any]:
    configs = summary["configs"]
    comparisons_by_target = {c["to"]: c for c in summary["comparisons"]}
    cells, deltas = {}, {}
    for name, cfg in configs.items():
        cells[name] = {f"{c['kb']}|{c['lang']}": c for c in cfg["cells"]}
        comparison = comparisons_by_target.get(name)
        if comparison:
            deltas[name] = {m: {f"{c['kb']}|{c['lang']}": {"delta": c["delta"], "p": c.get("p_adj")}
                                for c in comparison[m]["cells"]} for m in TESTED_METRICS if m in comparison}
    data = summary.get("data") or {}
    metrics = [*(ANSWER_METRICS if _answering(summary) else ()), *RETRIEVAL_METRICS]
    return {"title": "babelrag — " + ("answers" if _answering(summary) else "retrieval") + " by cell",
            "configs": list(configs), "metrics": metrics,
            "kbs": sorted({c["kb"] for cfg in configs.values() for c in cfg["cells"]}),
            "langs": sorted({c["lang"] for cfg in configs.values() for c in cfg["cells"]}),
            "cells": cells, "deltas": deltas, "overall": {n: cfg["overall"] for n, cfg in configs.items()},
            "subtitle": f"{data.get('source', '')} · {'quick sample' if data.get('quick') else 'full'}" if data else ""}


def html(summary: dict[str, Any]) -> str:
    template = files("babelrag.evaluate").joinpath("report.html").read_text(encoding="utf-8")
    payload = json.dumps(html_data(summary), ensure_ascii=False).replace("</", "<\\/")
    return template.replace("/*DATA*/null", payload)


def write_reports(summary: dict[str, Any], out: Path, html_file: Path | None = None) -> tuple[Path, Path]:
    markdown_file = out / "report.md"
    markdown_file.write_text(markdown(summary), encoding="utf-8")
    html_file = html_file or out / "report.html"
    html_file.write_text(html(summary), encoding="utf-8")
    loop_figure(summary["configs"], out)
    layout_figure(summary["configs"], out)
    return markdown_file, html_file
