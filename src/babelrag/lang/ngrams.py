"""Character 3-grams as [BERGEN] defines them (docs/methods.md#answer-metrics): the answer metric, and the overlap the
generator uses to attribute an uncited answer to a passage.

No English-only normalisation by default: removing "a/an/the" deletes real words in es/pt/it/fr
and deleting punctuation glues tokens ("1834-08-01" → "18340801"). ``bergen_code`` reproduces
the public code path (SQuAD normaliser) only to compare with published numbers (docs/methods.md#pitfall-squad-normaliser).
"""
from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Sequence
from typing import Literal

Char3Mode = Literal["chirkova", "bergen_code", "unicode"]
ASCII_PUNCT = str.maketrans({c: " " for c in string.punctuation})
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def unicode_punct_to_space(text: str) -> str:
    return "".join(" " if unicodedata.category(c).startswith("P") else c for c in text)


def _squad_normalise(text: str) -> str:
    text = text.lower()
    text = "".join(c for c in text if c not in set(string.punctuation))
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def char3grams(text: str, mode: Char3Mode = "chirkova") -> Counter[str]:
    if mode == "bergen_code":
        text = _squad_normalise(text)
    else:
        text = text.lower().translate(ASCII_PUNCT)
        if mode == "unicode":
            text = unicode_punct_to_space(text)
    grams: Counter[str] = Counter()
    for word in text.split():
        if len(word) < 3:
            grams[word] += 1
        else:
            grams.update(word[i:i + 3] for i in range(len(word) - 2))
    return grams


def char3gram_recall(prediction: str, references: Sequence[str], mode: Char3Mode = "chirkova") -> float:
    """max over references of |grams(pred) ∩ grams(ref)| / |grams(ref)| (multisets)."""
    predicted = char3grams(prediction, mode)
    best = 0.0
    for reference in references:
        wanted = char3grams(reference, mode)
        total = sum(wanted.values())
        if total:
            best = max(best, sum((predicted & wanted).values()) / total)
    return best
