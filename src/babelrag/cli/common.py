"""What every command shares: the Typer app, the consoles, and the common options."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

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
ConcurrencyOpt = Annotated[Optional[int], typer.Option(
    "--concurrency", min=1, max=64, help="Questions in flight (default: 1 for retrieval, the LLM's slots for LLM "
    "methods: $BABELRAG_LLM_SLOTS in-process, $BABELRAG_LLM_CONCURRENCY for an endpoint). Output as sequential.")]
DEFAULT_DATA = Path(os.environ.get("BABELRAG_DATA", "../shared/data"))  # the repo's data, run from its root


def split(value: str | None) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip()) if value else ()
