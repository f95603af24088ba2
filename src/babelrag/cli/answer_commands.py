"""Answering and serving: ask, serve."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from babelrag.cli.common import PRESET_HELP, SET_HELP, CountryOpt, KbOpt, LlmOpt, QueryLangOpt, StoreOpt, app, err, out


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question.")],
    kb: KbOpt,
    store: StoreOpt = None,
    preset: Annotated[str, typer.Option(help=PRESET_HELP)] = "default",
    country: CountryOpt = None,
    query_lang: QueryLangOpt = None,
    llm: LlmOpt = None,
    set_: Annotated[Optional[list[str]], typer.Option("--set", help=SET_HELP)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print answer, citations and trace as JSON.")] = False,
) -> None:
    """Answer a question from a knowledge base, in the question's language, citing the passages used; the
    answer streams to the terminal as it is generated."""
    from babelrag.config import for_country, parse_overrides, preset_config
    from babelrag.door import checked
    from babelrag.generate.answerer import Answerer
    from babelrag.kb import KnowledgeBase
    from babelrag.types import Question

    config = preset_config(preset, for_country({**({"llm": llm} if llm else {}), **parse_overrides(set_ or [])},
                                               country))

    def shown(piece: str) -> None:  # the answer as it is generated: nothing to wait for in silence
        out.print(piece, end="", markup=False, highlight=False, soft_wrap=True)

    with KnowledgeBase.open(kb, store) as handle:
        door = checked(Question(question, lang=query_lang, country=country), config, handle.manifest.languages)
        answer = Answerer(handle, door.config).ask(door.question, on_text=None if as_json else shown)
        door.noted(answer.trace)
    if as_json:
        out.print_json(json.dumps(answer.to_dict(), ensure_ascii=False, default=str))
        return
    out.print()
    table = Table(title=f"sources ({answer.cited_how}; question language {answer.question.lang})")
    for column in ("#", "lang", "translated", "doc_id", "text"):
        table.add_column(column, overflow="fold")
    for cp in answer.citations:
        text = cp.text.replace("\n", " ")
        table.add_row(str(cp.number), cp.lang + ("" if cp.lang == cp.passage.lang else f" (from {cp.passage.lang})"),
                      "yes" if cp.translated else "no", cp.passage.doc_id, text[:200] + ("…" if len(text) > 200 else ""))
    out.print(table)
    totals = answer.trace.llm_totals()
    paths = [s.label for s in answer.trace.steps if s.stage == "retrieve"]
    for warning in answer.trace.warnings():
        err.print(f"[yellow]warning:[/] {escape(warning)}")
    err.print(f"paths: {', '.join(paths) or 'none'} · context: {answer.context.strategy} "
              f"({len(answer.context.passages)} passages) · LLM calls {totals['llm_calls']} "
              f"({totals['llm_cached']} cached), {totals['llm_tokens']} tokens · {answer.trace.seconds():.1f} s")


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8000,
    store: StoreOpt = None,
    runs: Annotated[Path, typer.Option(help="Folder of run folders shown under /runs.")] = Path("runs"),
    llm: LlmOpt = None,
    api_key_file: Annotated[Optional[Path], typer.Option(help="File with one write API key per line "
                                                             "(or set $BABELRAG_API_KEY).")] = None,
    llm_slots: Annotated[int, typer.Option(help="LLM jobs at once.")] = 1,
    llm_queue: Annotated[int, typer.Option(help="LLM jobs allowed to wait; more get 429.")] = 8,
    timeout: Annotated[float, typer.Option(help="Seconds per request.")] = 120.0,
    max_body: Annotated[int, typer.Option(help="Largest request body in bytes.")] = 10 << 20,
    cors_origin: Annotated[Optional[list[str]], typer.Option(help="Allow this origin (CORS is off otherwise).")] = None,
    read_key_file: Annotated[Optional[Path], typer.Option(help="File with one read API key per line: reads then "
                                                              "need X-API-Key too (write keys also read).")] = None,
    rate_limit: Annotated[int, typer.Option(help="Searches and answers per client per minute (0: no limit).")] = 120,
    allowed_host: Annotated[Optional[list[str]], typer.Option(help="Host header to serve besides the bound host and "
                                                                   "localhost (DNS-rebinding defence).")] = None,
    set_: Annotated[Optional[list[str]], typer.Option("--set", help="Default config for every request: "
                                                                    "key=value (clients may override).")] = None,
) -> None:
    """Serve the HTTP API and the web page (one process owns the embedded store)."""
    import uvicorn

    from babelrag.server.app import create_app
    from babelrag.server.service import Service

    def key_lines(path: Path | None) -> set[str]:
        return {k.strip() for k in (path.read_text().split("\n") if path else []) if k.strip()}

    keys = key_lines(api_key_file)
    if os.environ.get("BABELRAG_API_KEY"):
        keys.add(os.environ["BABELRAG_API_KEY"])
    if not keys:
        err.print("[yellow]note:[/] no API key: write endpoints are disabled (set $BABELRAG_API_KEY)")
    from babelrag.config import parse_overrides

    hosts = tuple(dict.fromkeys([host, "127.0.0.1", "localhost", *(allowed_host or [])]))
    if host in ("0.0.0.0", "::") and not allowed_host:
        err.print("[yellow]note:[/] listening on every interface: pass --allowed-host NAME for each name clients "
                  "use (only localhost is served otherwise)")
    service = Service(store, runs, frozenset(keys), llm, llm_slots, llm_queue, timeout, max_body,
                      parse_overrides(set_ or []), read_keys=frozenset(key_lines(read_key_file)),
                      rate_limit=rate_limit, allowed_hosts=hosts)
    uvicorn.run(create_app(service, cors_origin), host=host, port=port, log_level="warning")
