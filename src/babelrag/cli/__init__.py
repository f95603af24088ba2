"""``babelrag`` commands. Thin: parse flags, call the library, print (``--json`` for machines)."""
from __future__ import annotations

import sys

from rich.markup import escape

from babelrag.cli import (  # noqa: F401 - importing registers the commands
    analysis_commands,
    answer_commands,
    eval_commands,
    kb_commands,
    model_commands,
    tune_commands,
)
from babelrag.cli.common import app, err
from babelrag.errors import BabelragError


def main() -> None:
    try:
        app()
    except BabelragError as error:
        err.print(f"[red]error:[/] {escape(str(error))}")
        sys.exit(1)

