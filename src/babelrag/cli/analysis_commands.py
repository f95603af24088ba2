"""Analysis commands: analyze preference, analyze generator, analyze gold."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Optional

import typer

from babelrag.cli.common import ConcurrencyOpt, KbOpt, LlmOpt, StoreOpt, app, err, out, split
from babelrag.errors import BabelragError, shown

analyze_app = typer.Typer(help="Language-preference measurements on any KB and golden set.", no_args_is_help=True)
app.add_typer(analyze_app, name="analyze")
GoldenOpt = Annotated[Path, typer.Option("--golden", help="Golden set (JSONL).")]


@analyze_app.command("preference")
def preference(
    kb: KbOpt,
    golden: GoldenOpt,
    rescorer: Annotated[str, typer.Option(help="dense (embedding cosine) or cross-encoder:PATH (a trained head).")] = "dense",
    translator: Annotated[str, typer.Option(help="llm, parallel (the KB's own language versions of a page), "
                                                 "or mt:PATH.")] = "llm",
    targets: Annotated[str, typer.Option(help="query (T = Lq), all (the MLRS matrix), or a list: en,ko.")] = "query",
    per_lang: Annotated[int, typer.Option(help="Questions per query language (0: all).")] = 20,
    n: Annotated[int, typer.Option("-n", help="List size re-scored for MLRS.")] = 10,
    lam: Annotated[float, typer.Option(help="Ridge λ for DeLP.")] = 1.0,
    cultural: Annotated[bool, typer.Option(help="Run the locale classifier for the cultural prior.")] = True,
    sensitivity: Annotated[int, typer.Option(help="Gold-availability sensitivity: measure again at N gold shares "
                                                  "between two languages (docs/methods.md#delp-sensitivity; costs N measurements).")] = 0,
    sensitivity_pair: Annotated[Optional[str], typer.Option(help="The two languages, e.g. en,ko "
                                                                 "(default: en and the first other).")] = None,
    llm: LlmOpt = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Output folder.")] = Path("runs/preference"),
    store: StoreOpt = None,
    concurrency: ConcurrencyOpt = None,
) -> None:
    """MLRS per (query, target language), structural priors, DeLP and their correlations, with heatmaps."""
    from babelrag.analysis.preference import PreferenceOptions, analyze_preference
    from babelrag.models.llm import slots_of
    from babelrag.analysis.report import write_preference
    from babelrag.evaluate.golden import load_golden
    from babelrag.kb import KnowledgeBase

    if sensitivity_pair and len(split(sensitivity_pair)) != 2:
        raise BabelragError(f"--sensitivity-pair: two languages, e.g. en,ko (got '{shown(sensitivity_pair)}')")
    options = PreferenceOptions(n=n, targets=targets, per_lang=per_lang or None, rescorer=rescorer,
                                translator=translator, lam=lam, cultural=cultural, sensitivity_ratios=sensitivity,
                                sensitivity_pair=tuple(split(sensitivity_pair)) if sensitivity_pair else None,
                                **({"llm": llm} if llm else {}))
    if concurrency is None:  # translating with the LLM: as many questions as it has slots
        concurrency = slots_of(options.llm) if translator == "llm" else 1
    with KnowledgeBase.open(kb, store) as handle:
        result = analyze_preference(handle, load_golden(golden), replace(options, concurrency=concurrency))
    files = write_preference(result, out_dir)
    out.print(files["markdown"].read_text(), markup=False, highlight=False)
    err.print(f"written: {', '.join(str(p) for p in files.values())}")


@analyze_app.command("generator")
def generator(
    kb: KbOpt,
    golden: GoldenOpt,
    langs: Annotated[str, typer.Option(help="Answer languages (comma-separated).")] = "en,de,es,zh,ru,ar,th,tr",
    questions: Annotated[int, typer.Option(help="Questions to sample.")] = 10,
    llm: LlmOpt = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Output folder.")] = Path("runs/generator-preference"),
    store: StoreOpt = None,
    concurrency: ConcurrencyOpt = None,
) -> None:
    """Answers in each of N languages from the same evidence; pairwise similarity; preference per language."""
    import random

    from babelrag.analysis.generator_preference import generator_preference
    from babelrag.models.llm import slots_of
    from babelrag.analysis.report import heatmap, matrix
    from babelrag.evaluate.golden import load_golden
    from babelrag.kb import KnowledgeBase

    sample = random.Random(0).sample(load_golden(golden), questions)
    with KnowledgeBase.open(kb, store) as handle:
        model = llm or "qwen2.5-coder-0.5b"
        result = generator_preference(handle, sample, list(split(langs)), model,
                                      concurrency=concurrency or slots_of(model))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "generator_preference.json").write_text(json.dumps(result, indent=2, ensure_ascii=False))
    names = result["languages"]
    heatmap(matrix(result["similarity"], names, names), names, names, "answer similarity across languages",
            out_dir / "generator_preference.png", "{:.2f}", "Greens")
    for lang, value in sorted(result["preference"].items(), key=lambda item: -item[1]):
        out.print(f"{lang}: {value:.4f}")
    err.print(f"written: {out_dir}")


@analyze_app.command("gold")
def gold(
    kb: KbOpt,
    golden: GoldenOpt,
    k: Annotated[int, typer.Option("-k", help="Recall@k alongside.")] = 10,
    preset: Annotated[str, typer.Option(help="Retrieval configuration for Recall@k.")] = "default",
    store: StoreOpt = None,
) -> None:
    """Per question language: how often the gold page exists in each KB language, with Recall@k."""
    from babelrag.analysis.gold import gold_availability, gold_markdown
    from babelrag.evaluate.golden import load_golden
    from babelrag.kb import KnowledgeBase

    with KnowledgeBase.open(kb, store) as handle:
        report = gold_availability(handle, load_golden(golden), k, preset)
    out.print(gold_markdown(report), markup=False, highlight=False)
