"""What every command shares: the Typer app, the consoles, and the common options."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional, get_args

import typer
from rich.console import Console

from babelrag import __version__
from babelrag.config import CONTEXT_CHOICES, PRESETS, SearchConfig
from babelrag.registry import RERANKERS, STRATEGIES

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Multilingual retrieval-augmented generation, measured cell by cell.")
out = Console()
err = Console(stderr=True, soft_wrap=True, highlight=False)


def _version(shown: bool) -> None:
    if shown:
        out.print(f"babelrag {__version__}")
        raise typer.Exit()


@app.callback()
def _main(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                help="Print the version and exit.")] = False) -> None:
    """Multilingual retrieval-augmented generation, measured cell by cell."""


def choices(field: str) -> str:
    """A config field's allowed words, as the config itself defines them (help texts cannot drift)."""
    return " | ".join(get_args(SearchConfig.model_fields[field].annotation))


# help texts generated from the registries: a new preset, reranker, strategy or context shows up by itself
PRESET_HELP = f"Named configuration: {', '.join(PRESETS)}; or several joined by '+' (e.g. chat+crossrag)."
RERANK_HELP = f"Reranker: auto, {RERANKERS.known()}."
SET_HELP = (f"Any config field: key=value (e.g. strategy={'|'.join(STRATEGIES)}; context={'|'.join(CONTEXT_CHOICES)}; "
            f"delta.tau_low=0.5), or in sections: query.hyde_lang=pivot, selection.k=5, answer.context=dkm.")

StoreOpt = Annotated[Optional[str], typer.Option("--store", help="KB store: a directory (embedded Qdrant Edge), "
                                                 "an http(s):// Qdrant URL, or :memory:. Default $BABELRAG_STORE "
                                                 "or ~/.babelrag/store.")]
KbOpt = Annotated[str, typer.Option("--kb", help="Knowledge base name.")]
CountryOpt = Annotated[Optional[str], typer.Option(help="The question's country (ISO 3166, any case): that country's "
                                                   "passages + global ones.")]
QueryLangOpt = Annotated[Optional[str], typer.Option(help="The question's language (ISO 639; default: detected).")]
LlmOpt = Annotated[Optional[str], typer.Option("--llm", help="LLM for translation, HyDE, DELTA: a provisioned "
                                                "model (babelrag models list), a .gguf path, or openai:MODEL@URL.")]
ConcurrencyOpt = Annotated[Optional[int], typer.Option(
    "--concurrency", min=1, max=64, help="Questions in flight (default: 1 for retrieval, the LLM's slots for LLM "
    "methods: $BABELRAG_LLM_SLOTS in-process, $BABELRAG_LLM_CONCURRENCY for an endpoint). Output as sequential.")]
DEFAULT_DATA = Path(os.environ.get("BABELRAG_DATA", "../shared/data"))  # the repo's data, run from its root


def split(value: str | None) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip()) if value else ()
