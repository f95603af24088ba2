"""Errors a user can act on: each says where (file, line, field or KB) and what to do."""
from __future__ import annotations

from pathlib import Path

SHOWN_CHARS = 40  # of a value a user wrote, repeated in an error: enough to recognise, never a whole input


def shown(value: object) -> str:
    """A user's value fit to repeat in an error: its start only."""
    text = str(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"


class BabelragError(Exception):
    """Base class; the CLI prints the message and exits non-zero without a traceback."""


class InputError(BabelragError):
    """Bad input data, located to the file and line (and field when known)."""

    def __init__(self, path: str | Path, line: int | None, message: str, field: str | None = None):
        self.path, self.line, self.field = str(path), line, field
        where = self.path + (f":{line}" if line is not None else "")
        what = f"field '{field}': " if field else ""
        super().__init__(f"{where}: {what}{message}")


class KBNotFound(BabelragError):
    def __init__(self, kb: str, store: str, known: list[str]):
        hint = f" Known KBs: {', '.join(known)}." if known else " The store holds no KB yet."
        super().__init__(f"knowledge base '{kb}' not found in store {store}.{hint} "
                         f"Create it with `babelrag index SOURCE --kb {kb}`.")


class StoreError(BabelragError):
    """The store can't be opened or reached."""


class KBExists(StoreError, FileExistsError):
    """A complete KB of that name is already in the target store: a copy never overwrites one."""


class StoreHeld(StoreError):
    """An embedded KB is open in another process (``pid``, when it wrote it): its manifest can still be
    read (``babelrag kbs``/``info`` while ``serve`` holds the store), its shard cannot be loaded."""

    def __init__(self, message: str, pid: int | None):
        self.pid = pid
        super().__init__(message)


class IndexMismatch(BabelragError):
    """The index was built with other versions or models than this install would query it with."""

    def __init__(self, kb: str, differences: list[tuple[str, object, object]]):
        self.kb, self.differences = kb, differences
        lines = "\n".join(f"  - {name}: index has {built!r}, this install has {now!r}"
                          for name, built, now in differences)
        super().__init__(f"knowledge base '{kb}' was built with different components:\n{lines}\n"
                         f"Rebuild it (`babelrag index ... --kb {kb} --rebuild`) or install the "
                         f"versions it was built with.")


class ConfigError(BabelragError):
    """An invalid or contradictory configuration (a field name is always in the message)."""


class KBNotReady(BabelragError):
    """The KB's first write is still running: it exists only once that write is complete."""

    def __init__(self, kb: str):
        self.kb = kb
        super().__init__(f"knowledge base '{kb}' is not ready: its first ingest is still running; retry shortly")


class Unreadable(BabelragError):
    """A file babelrag wrote is damaged or foreign; ``public`` says so without its contents or paths."""

    def __init__(self, what: str, problem: str):
        self.public = f"{what} is unreadable ({problem.split(':')[0]})"
        super().__init__(f"{what} is unreadable: {problem}")


class KBUnreadable(Unreadable):
    """A KB's manifest, journal, profile or embedder spec is damaged: that KB cannot be opened (the others can)."""

    def __init__(self, kb: str, problem: str):
        self.kb = kb
        super().__init__(f"knowledge base '{kb}'", problem)


class RunUnreadable(Unreadable):
    """A run folder's files are damaged or not a run's."""

    def __init__(self, run: str, problem: str):
        super().__init__(f"run '{run}'", problem)
