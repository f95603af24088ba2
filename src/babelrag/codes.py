"""Language and country codes checked at the door: ISO 639 languages, ISO 3166 countries, any case.

A code that names nothing used to search nothing: ``--query-lang english`` was taken as the question's
language, ``--lang xx`` filtered every passage away and ``--country se`` missed the KB's ``SE``. Every
door — index, search, ask, the Python API, the service, the integrations — reads codes through these
two functions, so a code one accepts the others accept too. Messages name the field, never the value.
"""
from __future__ import annotations

from functools import cache

import pycountry
from iso3166 import countries_by_alpha2

from babelrag.errors import ConfigError


@cache
def _iso639(code: str) -> str | None:
    """The ISO 639-1 code when the language has one (``swe`` → ``sv``), else its ISO 639-3 code."""
    found = (pycountry.languages.get(alpha_2=code) if len(code) == 2 else
             pycountry.languages.get(alpha_3=code) or pycountry.languages.get(bibliographic=code))
    return None if found is None else getattr(found, "alpha_2", None) or found.alpha_3


def iso_language(value: str) -> str | None:
    """A language code as babelrag stores it — lower case, region dropped (``sv-SE`` → ``sv``) — or None
    when ``value`` is not an ISO 639 code."""
    code = value.strip().lower().replace("_", "-").split("-")[0]
    return _iso639(code) if code.isascii() and code.isalpha() and 2 <= len(code) <= 3 else None


def language_code(value: str, field: str = "lang") -> str:
    code = iso_language(value) if isinstance(value, str) else None
    if code is None:
        raise ConfigError(f"{field}: not an ISO 639 language code (e.g. 'sv', 'zh')")
    return code


def iso_country(value: str) -> str | None:
    """An ISO 3166 alpha-2 country code in upper case, or None."""
    code = value.strip().upper() if isinstance(value, str) else ""
    return code if code in countries_by_alpha2 else None


def country_code(value: str, field: str = "country") -> str:
    code = iso_country(value)
    if code is None:
        raise ConfigError(f"{field}: not an ISO 3166 alpha-2 country code (e.g. 'SE')")
    return code
