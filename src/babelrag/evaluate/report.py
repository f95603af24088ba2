"""Reports over one or more runs: a Markdown summary and a self-contained HTML cell matrix.

The HTML page embeds its data and code (no network, no build step): rows are knowledge bases,
columns question languages; step through configurations or play them, switch the metric, hover
a cell for its n, interval and change from the previous configuration.
"""
from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path
from typing import Any

from babelrag.errors import ConfigError
from babelrag.evaluate.loops import loop_summary
from babelrag.evaluate.runs import RunResult, load_run
from babelrag.evaluate.significance import compare

RETRIEVAL_METRICS = ("recall@10", "mrr", "docs_passed")
ANSWER_METRICS = ("answer_char3", "answer_em", "answer_lang_ok")
TESTED_METRICS = ("recall@10", "mrr", "answer_char3", "answer_em")
SIGNIFICANT = 0.05


def comparisons(results: list[RunResult]) -> list[dict[str, Any]]:
    """Each configuration against the previous one, per cell and overall (paired randomisation test),
    on every metric both runs have."""
    return [{"from": a.name, "to": b.name,
             **{m: compare(a.rows, b.rows, m) for m in TESTED_METRICS
                if any(m in r for r in a.rows) and any(m in r for r in b.rows)}}
            for a, b in zip(results, results[1:])]


def _answering(summary: dict[str, Any]) -> bool:
    return any("answer_char3" in cfg["overall"] for cfg in summary["configs"].values())


def load_summary(folders: list[Path]) -> dict[str, Any]:
    """Bench folders (several configurations) and single eval runs, combined in the order given."""
    results: list[RunResult] = []
    extra: dict[str, Any] = {}
    for folder in folders:
        metrics_file = folder / "metrics.json"
        if not metrics_file.exists():
            raise ConfigError(f"{folder}: no metrics.json (not a run folder)")
        metrics = json.loads(metrics_file.read_text(encoding="utf-8"))
        if "runs" in metrics:
            results.extend(load_run(folder / sub) for sub in metrics["runs"].values())
            extra = {k: metrics[k] for k in ("calibration", "data", "ladder") if k in metrics}
        else:
            results.append(load_run(folder))
    for result in results:  # runs written before the loop summary existed get it from their traces
        if "coral" not in result.metrics["overall"] and (loops := loop_summary(result.rows)) is not None:
            result.metrics["overall"]["coral"] = loops
    names = [r.name for r in results]
    if len(set(names)) != len(names):
        results = [RunResult(f"{r.name} ({r.folder.name})", r.folder, r.rows, r.metrics) for r in results]
    return {"configs": {r.name: r.metrics for r in results}, "comparisons": comparisons(results), **extra}


def _fmt(value: Any, metric: str = "") -> str:
    if value is None:
        return "–"
    return f"{value:.1f}" if metric.startswith(("docs", "latency", "retrieval", "llm")) else f"{value:.3f}"


def _cell_key(cell: dict[str, Any]) -> tuple[str, str]:
    return cell["kb"], cell["lang"]


def markdown(summary: dict[str, Any]) -> str:
    configs = summary["configs"]
    names = list(configs)
    columns = ["n", "recall@10", "recall@1", "mrr", "ndcg@10", "docs_passed", "retrieval_ms_p50", "llm_calls",
               "llm_tokens", "llm_seconds"]
    if _answering(summary):
        columns[1:1] = ["answer_char3", "answer_em", "answer_lang_ok", "answer_lang_unclassified"]
    matrix = "answer_char3" if _answering(summary) else "recall@10"
    ratios = summary.get("latency_ratios", {})
    lines = ["# babelrag — retrieval by cell", ""]
    data = summary.get("data")
    if data:
        lines += [f"Data: `{data['source']}` ({'quick sample' if data['quick'] else 'full'}, seed {data['seed']}, "
                  f"{data['questions']} questions).", *[f"- note: {n}" for n in data.get("notes", [])], ""]
    lines += ["## Overall", "", "Retrieval time leaves out waiting for models; its ratio is to the step named "
              "(median over the same questions). LLM calls include cached ones at their original cost.", "",
              "| configuration | " + " | ".join(columns) + " | retrieval × |", "|---" * (len(columns) + 2) + "|"]
    for name in names:
        overall = configs[name]["overall"]
        ratio = ratios.get(name)
        cells = [str(overall["n"]) if c == "n" else _fmt(overall.get(c), c) for c in columns]
        ratio_text = f"{ratio['retrieval_ms']:.2f}× {ratio['baseline']}" if ratio else "–"
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {ratio_text} |")
    for source, calibration in summary.get("calibration", {}).items():
        lines += ["", f"Threshold calibrated on `{source}` ({calibration['split'] or 'all'} questions, "
                      f"n = {calibration['n']}): τ = {calibration['threshold']:.4f}, Recall@10 "
                      f"{calibration['recall_before']:.3f} → {calibration['recall_after']:.3f}, docs passed "
                      f"{calibration['docs_passed_before']:.1f} → {calibration['docs_passed_after']:.1f}."]
    kbs = sorted({c["kb"] for cfg in configs.values() for c in cfg["cells"]})
    langs = sorted({c["lang"] for cfg in configs.values() for c in cfg["cells"]})
    for name in names:
        cells = {_cell_key(c): c for c in configs[name]["cells"]}
        lines += ["", f"## {name}: {matrix} by cell (n; * = fewer than 30 questions)", "",
                  "| KB | " + " | ".join(langs) + " |", "|---" * (len(langs) + 1) + "|"]
        for kb in kbs:
            row = []
            for lang in langs:
                cell = cells.get((kb, lang))
                row.append("not asked" if cell is None else
                           f"{_fmt(cell.get(matrix))} ({cell['n']}{'*' if cell['small'] else ''})")
            lines.append(f"| {kb} | " + " | ".join(row) + " |")
        ranked = sorted(cells.values(), key=lambda c: (c.get(matrix, 0.0), c.get("mrr", 0.0)))
        worst = ", ".join(f"{c['kb']}/{c['lang']} {_fmt(c.get(matrix))}" for c in ranked[:3])
        best = ", ".join(f"{c['kb']}/{c['lang']} {_fmt(c.get(matrix))}" for c in ranked[::-1][:3])
        lines += ["", f"Worst cells: {worst}. Best cells: {best}."]
    lines += _loop_lines(configs)
    lines += ["", "## Significant changes (paired randomisation test, p < 0.05)", ""]
    found = False
    for comparison in summary["comparisons"]:
        for metric in (m for m in TESTED_METRICS if m in comparison):
            test = comparison[metric]
            changed = [c for c in test["cells"] if c["p"] < SIGNIFICANT]
            overall = test["overall"]
            if overall["p"] < SIGNIFICANT or changed:
                found = True
                cells_text = ", ".join(f"{c['kb']}/{c['lang']} {c['delta']:+.3f} (p={c['p']:.3f})" for c in changed)
                lines.append(f"- {comparison['from']} → {comparison['to']}, {metric}: overall "
                             f"{overall['delta']:+.3f} (p={overall['p']:.3f})" + (f"; cells: {cells_text}" if changed else ""))
    if not found:
        lines.append("- none")
    return "\n".join(lines) + "\n"


def _mix(shares: dict[str, float]) -> str:
    return ", ".join(f"{lang} {share:.0%}" for lang, share in shares.items()) or "–"


def _loop_lines(configs: dict[str, Any]) -> list[str]:
    """CORAL's loop per configuration: rounds, where it searched vs where its evidence came from, cost."""
    loops = {name: cfg["overall"]["coral"] for name, cfg in configs.items() if cfg["overall"].get("coral")}
    if not loops:
        return []
    lines = ["", "## CORAL loop", "", "Languages the planner chose (share of corpus selections) against the languages of "
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
    loops = {name: cfg["overall"]["coral"] for name, cfg in configs.items() if cfg["overall"].get("coral")}
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
            deltas[name] = {m: {f"{c['kb']}|{c['lang']}": {"delta": c["delta"], "p": c["p"]}
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
    return markdown_file, html_file
