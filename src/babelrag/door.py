"""A question's codes checked against what the knowledge base holds, before anything is searched.

Every way in — the CLI, the Python API, the service, the OpenAI face, the integrations — passes its
question and configuration through ``checked``: language codes must be ISO 639 (as ``index`` demands),
a country any case of the KB's own spelling or of an ISO 3166 code. What is valid but absent from the
KB is not silently empty any more: a country the KB does not hold searches its global passages with a
warning (an error when it has none), filter languages it does not hold are named in a warning (an error
when it holds none of them). A warning is recorded on the trace (``noted``), so the CLI prints it and
the service returns it in ``warnings``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from babelrag.codes import country_code, language_code
from babelrag.search_config import SearchConfig
from babelrag.errors import ConfigError
from babelrag.types import Question, Trace

if TYPE_CHECKING:
    from babelrag.store.manifest import LanguageMix

Note = tuple[str, str, str]  # (stage, reason, fallback), as the trace records a failure


@dataclass(frozen=True, slots=True)
class Checked:
    question: Question
    config: SearchConfig
    notes: tuple[Note, ...] = ()

    def noted(self, trace: Trace) -> None:
        """Put the warnings on a search's or an answer's trace."""
        for stage, reason, fallback in self.notes:
            trace.fail(stage, reason, fallback)


def _held(names: Any) -> str:
    return ", ".join(sorted(names)) or "none"


def checked(question: Question, config: SearchConfig, held: LanguageMix) -> Checked:
    """``question`` and ``config`` with their codes normalised against the languages and countries the
    KB holds (its manifest's ``languages``), or a ``ConfigError`` naming the field."""
    countries, notes = held.countries, []
    lang = language_code(question.lang, "question language") if question.lang else None
    country = question.country
    if country is not None:
        spelled = {str(c).upper(): c for c in countries}
        country = spelled.get(str(country).strip().upper()) or country_code(country)
        if country not in countries:
            if not held.global_ and config.country_filter:
                raise ConfigError(f"country: this knowledge base has no passages for that country and no global "
                                  f"ones (its countries: {_held(countries)})")
            notes.append(("scope", f"country not in this knowledge base (its countries: {_held(countries)})",
                          "searched its global passages only" if config.country_filter else "searched every passage"))
    langs = tuple(dict.fromkeys(language_code(code, "langs") for code in config.langs))
    if langs:
        present = set(held.all)
        missing = [code for code in langs if code not in present]
        if len(missing) == len(langs):
            raise ConfigError(f"langs: this knowledge base holds none of these languages (it holds "
                              f"{_held(present)})")
        if missing:
            notes.append(("scope", f"{len(missing)} of the langs not in this knowledge base (it holds "
                                   f"{_held(present)})", "searched the others"))
    if langs != config.langs:
        config = config.model_copy(update={"langs": langs})
    return Checked(replace(question, lang=lang, country=country), config, tuple(notes))
