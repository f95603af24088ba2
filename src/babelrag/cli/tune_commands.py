"""Tuning: babelrag tune."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from babelrag.cli.common import KbOpt, LlmOpt, StoreOpt, app, err, out
from babelrag.tune.fitting import MIN_REFIT_ARTICLES


@app.command()
def tune(
    kb: KbOpt,
    golden: Annotated[Path, typer.Option("--golden", help="Golden set (JSONL); its split=dev questions are used.")],
    objective: Annotated[str, typer.Option(help="What each cell maximises on dev: mrr or recall@10.")] = "mrr",
    max_llm_calls: Annotated[float, typer.Option(help="LLM calls per question a cell may spend (0: none; "
                                                      "translation, pivot and HyDE paths cost about one).")] = 0.0,
    max_docs: Annotated[Optional[int], typer.Option(help="Passages passed on at most (k).")] = None,
    recall_loss: Annotated[float, typer.Option(help="Recall@k a rule's τ may cost on new questions, bounded "
                                                    "from its dev ones ((n·loss + 1)/(n + 1): 0.005 needs 199; "
                                                    "0: no threshold).")] = 0.005,
    dev_share: Annotated[Optional[float], typer.Option(help="No split tags: hash this share of the questions "
                                                            "(by qid) into dev.")] = None,
    keep_model: Annotated[bool, typer.Option("--keep-model", help="Keep the current relevance model "
                                                                   "(the KB's, or the shipped default).")] = False,
    selection_check: Annotated[bool, typer.Option(
        help="Keep a choice beyond the simplest option only where, chosen on half the dev questions, it gains on the "
             "other half (off: the one-standard-error rule alone, to measure the check).")] = True,
    min_refit_articles: Annotated[int, typer.Option(
        min=0, help="Dev articles (pages, where page ids name no article) a refit of every feature of the relevance "
                    "model needs to compete with the shipped one; with fewer, only the one-weight hybrid refit "
                    "competes with it.")] = MIN_REFIT_ARTICLES,
    out_file: Annotated[Optional[Path], typer.Option("--out", help="Also write the profile here (YAML).")] = None,
    llm: LlmOpt = None,
    store: StoreOpt = None,
) -> None:
    """Fit the KB's relevance model and choose, per (country × question language) cell, its paths and
    threshold from measured dev results; stored with the KB for `--preset tuned`."""
    from babelrag.errors import ConfigError, shown
    from babelrag.evaluate.golden import load_golden
    from babelrag.kb import KnowledgeBase
    from babelrag.tune.runner import TuneOptions, summary_lines, tune as run_tune, write_profile

    if objective not in ("mrr", "recall@10"):
        raise ConfigError(f"--objective: expected mrr or recall@10, got '{shown(objective)}'")
    options = TuneOptions(objective=objective, max_llm_calls=max_llm_calls, max_docs=max_docs,  # type: ignore[arg-type]
                          recall_loss=recall_loss, llm=llm, fit_model=not keep_model, dev_share=dev_share,
                          selection_check=selection_check, min_refit_articles=min_refit_articles)
    with KnowledgeBase.open(kb, store) as handle:
        result = run_tune(handle, load_golden(golden), options)
    if out_file:
        write_profile(result.profile, out_file)
        err.print(f"profile written: {out_file}")
    out.print("\n".join(summary_lines(result)), markup=False, highlight=False)
    err.print(f"[green]tuned[/] '{kb}': use it with --preset tuned (search, ask, eval, bench, serve)")
