"""Where a strategy's paths may search: the KB's languages per country, and the passage filter every
path shares (the question's country plus global passages, and the configured language scope)."""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from babelrag.search_config import SearchConfig
from babelrag.relevance.model import default_model
from babelrag.types import PassageFilter, Question

if TYPE_CHECKING:
    from babelrag.kb import KnowledgeBase
    from babelrag.store.manifest import Manifest


def kb_languages(manifest: Manifest, country: str | None, pivot: str, prefer: str | None = None) -> list[str]:
    """The KB's languages for ``country`` (and its global passages), pivot first, then ``prefer`` (the
    question's own language: searching it costs no translation), then by passage count — and where counts
    tie (a KB whose languages hold equal shares), by how well translated paths into each language found the
    gold on the shipped data's dev questions (measured, kept with the shipped relevance model), never by
    name. ``language_overrides`` in the manifest replace the computed set."""
    overrides = manifest.language_overrides
    declared = overrides.countries.get(country) if country else overrides.all
    if declared:
        langs = list(declared)
    else:
        seen = manifest.languages
        counts = Counter(seen.countries.get(country, {}) if country else seen.all)
        if country:
            counts.update(seen.global_)
        measured = default_model().meta.get("path_lang_mrr") or {}
        langs = sorted(counts, key=lambda lang: (-counts[lang], -measured.get(lang, 0.0), lang))
    return list(dict.fromkeys(([pivot] if pivot in langs else []) + ([prefer] if prefer in langs else []) + langs))


def own_language(manifest: Manifest, question: Question, pivot: str) -> str:
    """C_own: the local language of the question's country (its most frequent non-pivot language),
    the pivot for a pivot-only country, and the question's language without a country."""
    if not question.country:
        return question.lang or pivot
    langs = kb_languages(manifest, question.country, pivot)
    return next((lang for lang in langs if lang != pivot), langs[0] if langs else question.lang or pivot)


def path_filter(question: Question, config: SearchConfig, kb: KnowledgeBase) -> PassageFilter:
    """``lang_scope``: all → the configured ``langs`` (empty: every language); query → the question's
    language only (monoRAG); pivot → the pivot language only (tRAG); own → the question's country's
    local language ([CORAL]'s C_own); own+pivot → that and the pivot."""
    scope = config.lang_scope
    if scope == "all":
        langs: tuple[str, ...] = tuple(config.langs)
    elif scope == "query":
        langs = (question.lang,) if question.lang else ()
    elif scope == "pivot":
        langs = (config.pivot,)
    else:
        own = own_language(kb.manifest, question, config.pivot)
        langs = tuple(dict.fromkeys((own, config.pivot) if scope == "own+pivot" else (own,)))
    return PassageFilter(country=question.country if config.country_filter else None, langs=langs)
