"""Decoding loops: small models repeat a piece until the token limit. Found in finished text (a
translation, a refinement, a cut JSON answer) and while streaming, to stop paying for the rest."""

from __future__ import annotations

import regex

_LOOP = regex.compile(r"(\S.{2,40}?)(?:\s*\1){2,}", regex.DOTALL)  # a piece said three times in a row


def loops(text: str, source: str) -> bool:
    """Letters said three times over (not "1000000") where the source says nothing three times."""
    return any(regex.search(r"\p{L}", loop.group(1)) for loop in _LOOP.finditer(text)) and not _LOOP.search(source)


_TAIL_LOOP = regex.compile(r"(\S.{2,40}?)(?:\s*\1){3,}\s*$", regex.DOTALL)  # the text now ends in a loop


class LoopGuard:
    """Stops a generation as soon as it ends in a piece said four times in a row with letters in it
    (a decoding loop the source does not have): small models otherwise loop to the token limit, and
    the output is refused as a loop anyway, so the rest of the budget buys nothing."""

    TAIL = 400  # characters looked at: a loop piece is at most 40

    def __init__(self, source: str):
        self.source_loops = bool(_LOOP.search(source))
        self.tail, self.fired = "", False

    def __call__(self, piece: str) -> bool:
        self.tail = (self.tail + piece)[-self.TAIL:]
        if not self.source_loops and (loop := _TAIL_LOOP.search(self.tail)):
            self.fired = bool(regex.search(r"\p{L}", loop.group(1)))
        return self.fired
