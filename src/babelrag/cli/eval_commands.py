"""Evaluation commands: golden, eval, bench, report."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from babelrag.cli.common import DEFAULT_DATA, PRESET_HELP, SET_HELP, ConcurrencyOpt, LlmOpt, StoreOpt, app, err, out
from babelrag.cli.common import split as comma_list
from babelrag.experiments.ladders import LADDERS


@app.command()
def golden(
    sources: Annotated[list[str], typer.Argument(help="SQuAD/XQuAD-format JSON files, or CSV files with question "
                                                     "and page columns (optional id, lang, country, answer).")],
    kb: Annotated[str, typer.Option("--kb", help="The knowledge base the questions are about.")],
    to: Annotated[Path, typer.Option("--out", help="The golden set to write (JSONL).")],
    lang: Annotated[Optional[str], typer.Option(help="The questions' language (default: the file's .<lang>.json "
                                                     "suffix, the row's, or detected).")] = None,
    dev_share: Annotated[float, typer.Option(min=0.0, max=1.0, help="Share of articles (pages) tagged split=dev, "
                                                                   "for `babelrag tune`; the rest are test.")] = 0.2,
) -> None:
    """Build a golden set for eval and tune from SQuAD/XQuAD files or a CSV of questions and their pages."""
    from babelrag.evaluate.golden import save_golden
    from babelrag.golden_sources import golden_from

    questions = golden_from(sources, kb, lang, dev_share)
    save_golden(questions, to)
    dev = sum(q.tags.get("split") == "dev" for q in questions)
    err.print(f"[green]wrote[/] {len(questions)} questions ({dev} dev, {len(questions) - dev} test; languages "
              f"{', '.join(sorted({q.lang for q in questions}))}) to {to}")


@app.command("eval")
def evaluate(
    golden: Annotated[Path, typer.Option("--golden", help="Golden set (JSONL).")],
    kb: Annotated[Optional[str], typer.Option("--kb", help="Index to search (default: each question's own).")] = None,
    preset: Annotated[str, typer.Option(help=PRESET_HELP)] = "default",
    set_: Annotated[Optional[list[str]], typer.Option("--set", help=SET_HELP)] = None,
    out: Annotated[Optional[Path], typer.Option(help="Run folder (default runs/eval-<kb>-<preset>-<time>).")] = None,
    answer: Annotated[bool, typer.Option("--answer", help="Generate answers and score them too.")] = False,
    name: Annotated[Optional[str], typer.Option(help="Configuration name in metrics and reports.")] = None,
    llm: LlmOpt = None,
    split: Annotated[Optional[str], typer.Option(help="Headline metrics on questions tagged with this split "
                                                       "(e.g. test, when dev tuned something); others shown apart.")] = None,
    warm: Annotated[bool, typer.Option("--warm", help="Reuse cached candidates and query vectors (fast sweeps); "
                                                      "times then measure the caches and are labelled warm.")] = False,
    store: StoreOpt = None,
    concurrency: ConcurrencyOpt = None,
) -> None:
    """Evaluate one configuration on a golden set: per-question traces, metrics overall and per cell."""
    from babelrag.config import parse_overrides, preset_config
    from babelrag.evaluate.golden import load_golden
    from babelrag.evaluate.report import summarise_runs, write_reports
    from babelrag.evaluate.runs import run_config

    config = preset_config(preset, {**({"llm": llm} if llm else {}), **parse_overrides(set_ or [])})
    label = name or (preset + "".join(f" {pair}" for pair in set_ or []))
    folder = out or Path("runs") / f"eval-{kb or golden.stem}-{preset}-{time.strftime('%Y%m%d-%H%M%S')}"
    questions = load_golden(golden)
    result = run_config(label, config, questions, folder, store, index=kb, answer=answer,
                        timing="warm" if warm else "cold", report_split=split, concurrency=concurrency)
    if seen := result.metrics.get("seen"):  # tuned or fitted on: kept out of the headline
        err.print(f"[yellow]note:[/] {seen['n']} questions left out of the headline figures: "
                  + "; ".join(f"{n} because {why}" for why, n in seen["why"].items()))
    write_reports(summarise_runs([result]), folder)
    _print_metrics({label: result.metrics})
    err.print(f"run folder: {folder}")


@app.command()
def bench(
    quick: Annotated[bool, typer.Option(help="A fixed small sample (minutes on 2 cores).")] = False,
    data: Annotated[Path, typer.Option(help="Folder with xquad-dev/ and swefaq-dev/, or any folder of "
                                            "XQuAD-format files (<name>.<lang>.json).")] = DEFAULT_DATA,
    ladder: Annotated[Optional[str], typer.Option(help="Ladder of configurations: blog (default), "
                                                       f"{', '.join(n for n in LADDERS if n != 'blog')}.")] = None,
    qa: Annotated[bool, typer.Option("--qa", help="The answering ladder (qa; qa-core with --quick).")] = False,
    out: Annotated[Optional[Path], typer.Option(help="Output folder (default runs/bench-<time>); an existing "
                                                     "one resumes.")] = None,
    seed: Annotated[int, typer.Option(help="Seed for the benchmark builders.")] = 13,
    llm: LlmOpt = None,
    llm_per_cell: Annotated[Optional[int], typer.Option(help="Questions per cell for the LLM steps "
                                                             "(default 1 with --quick, else 20).")] = None,
    llm_per_kb: Annotated[Optional[int], typer.Option(help="Questions per knowledge base for the LLM steps, "
                                                           "instead of per cell (a smaller spread sample).")] = None,
    store: StoreOpt = None,
    concurrency: ConcurrencyOpt = None,
    datasets: Annotated[Optional[str], typer.Option(
        help="Comma-separated datasets or layouts (default all but the held-out): xquad-cells, swefaq, xquad-unique, "
             "xquad-scattered, mixed, xquad-skewed; layouts parallel, monolingual, unique-country, scattered, mixed, "
             "skewed; held out, only when named: xquad-skewed-local (skewed-local).")] = None,
    split_by: Annotated[str, typer.Option(help="dev/test by article (test pages are new pages) or by question "
                                               "(new questions on seen pages).")] = "article",
    report_split: Annotated[str, typer.Option(help="The headline split: test (default); dev only to make a design "
                                                   "choice on, never to report.")] = "test",
) -> None:
    """The main job: build the cell benchmarks, index them, run a ladder, write metrics and the cell report."""
    from babelrag.experiments.runner import run_bench
    from babelrag.errors import ConfigError

    if split_by not in ("article", "question") or report_split not in ("dev", "test"):
        raise ConfigError("--split-by: article or question; --report-split: test or dev")
    folder = out or Path("runs") / f"bench-{'qa-' if qa else ''}{'quick-' if quick else ''}{time.strftime('%Y%m%d-%H%M%S')}"
    ladder = ladder or (("qa-core" if quick else "qa") if qa else "blog")
    summary = run_bench(folder, data, quick=quick, ladder_name=ladder, store=store, seed=seed, llm=llm,
                        llm_per_cell=llm_per_cell, llm_per_kb=llm_per_kb, concurrency=concurrency,
                        datasets=list(comma_list(datasets)) or None,
                        split_by=split_by, report_split=report_split)
    for note in summary["data"]["notes"]:
        err.print(f"[yellow]note:[/] {escape(note)}")
    _print_metrics(summary["configs"])
    err.print(f"metrics: {folder / 'metrics.json'}  report: {folder / 'report.html'} ({summary['seconds']:.0f} s)")


@app.command()
def report(
    runs: Annotated[list[Path], typer.Argument(help="Run folders (bench or eval), in the order to compare.")],
    html: Annotated[Optional[Path], typer.Option("--html", help="Write the HTML report here.")] = None,
) -> None:
    """Markdown summary (stdout) and a self-contained HTML cell matrix of one or more runs."""
    from babelrag.evaluate.report import html as render_html
    from babelrag.evaluate.report import load_summary, markdown

    summary = load_summary(runs)
    out.print(markdown(summary), markup=False, highlight=False)
    if html:
        html.write_text(render_html(summary), encoding="utf-8")
        err.print(f"HTML report: {html}")


def _print_metrics(configs: dict) -> None:
    """Overall numbers and each configuration's worst cell by its headline metric (answer char-3-gram
    recall when answers were scored, else Recall@10; no-RAG has no retrieval metrics)."""
    answering = any("answer_char3" in m["overall"] for m in configs.values())
    headline, label = ("answer_char3", "char3") if answering else ("recall@10", "R@10")
    table = Table(title=f"overall (worst cell by {label}; median ms per question: retrieval work, model calls)")
    columns = ("configuration", "n", *(("char3", "EM") if answering else ()), "R@10", "MRR", "docs", "ret ms",
               "model ms", "fail", "worst cell")
    for column in columns:
        table.add_column(column)
    for name, metrics in configs.items():
        overall = metrics["overall"]
        scored = [c for c in metrics["cells"] if c.get(headline) is not None]
        worst = min(scored, key=lambda c: c[headline]) if scored else None
        values = [f"{overall[m]:.3f}" if m in overall else "–"
                  for m in (*(("answer_char3", "answer_em") if answering else ()), "recall@10", "mrr")]
        table.add_row(name, str(overall["n"]), *values, f"{overall.get('docs_passed', 0):.1f}",
                      f"{overall.get('retrieval_ms_p50', 0):.1f}", f"{overall.get('model_ms_p50', 0):.0f}",
                      f"{overall.get('failed', 0):.0%}",
                      f"{worst['kb']}/{worst['lang']} {worst[headline]:.3f} (n={worst['n']})" if worst else "")
    out.print(table)
