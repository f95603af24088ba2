"""``babelrag`` commands. Thin: parse flags, call the library, print (``--json`` for machines)."""
from __future__ import annotations

import sys

import typer
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
    """Every user error is one ``error:`` line and a non-zero exit, never a traceback: bad flags (click's
    usage errors), babelrag's own errors, files that cannot be read or written; a bug still shows one."""
    try:
        code = app(standalone_mode=False)
    except typer.Abort:
        fail("interrupted", 130)
    except typer.TyperException as error:  # click's usage errors: a missing argument, a bad value, no such command
        ctx, message = getattr(error, "ctx", None), getattr(error, "format_message", error.__str__)()
        if not message.strip():  # no arguments at all: the help was the answer
            sys.exit(getattr(error, "exit_code", 2))
        hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        fail(message + hint, getattr(error, "exit_code", 2))
    except (BabelragError, OSError) as error:
        fail(str(error) if isinstance(error, BabelragError) or not error.strerror else
             f"{error.strerror}" + (f": {error.filename}" if error.filename else ""), 1)
    sys.exit(code if isinstance(code, int) else 0)


def fail(message: str, code: int) -> None:
    err.print(f"[red]error:[/] {escape(message)}")
    sys.exit(code)

