"""JSON Lines split on "\n" only: ``str.splitlines`` also breaks at U+2028, U+2029, U+0085 and other
separators that JSON allows unescaped inside strings, which would cut a valid record in two."""
from __future__ import annotations

from collections.abc import Iterator


def numbered_lines(text: str) -> Iterator[tuple[int, str]]:
    """(1-based line number, line without its "\\r\\n" or "\\n"), blank lines included."""
    for number, line in enumerate(text.split("\n"), start=1):
        yield number, line.removesuffix("\r")
