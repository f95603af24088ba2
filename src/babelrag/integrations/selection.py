"""Framework metadata filters (Haystack's filter dicts, LlamaIndex's ``MetadataFilters``) as babelrag's
own selection, and the search that honours it.

The policy, the same in both frameworks:
- conditions are joined by AND (nested AND groups too); OR and NOT are refused, as is any other field or
  operator, with a ``ConfigError`` naming it — a filter is never silently ignored;
- ``country`` (``==``) and ``lang`` (``==`` or ``in``) narrow the search itself, exactly as babelrag's
  ``country`` and ``langs`` do: a country means its passages *plus* global ones (add ``scope == "local"``
  for the country's own alone);
- ``scope`` (``==``) and ``doc_id`` (``==`` or ``in``) select among the search's candidates (its
  ``candidates`` pool, 50 by default), so a page outside that pool is not found.
Field names may carry Haystack's ``meta.`` prefix.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from babelrag.errors import ConfigError
from babelrag.types import Hit, PassageFilter

if TYPE_CHECKING:
    from babelrag.api import KB

OPERATORS = {"country": ("==",), "lang": ("==", "in"), "scope": ("==",), "doc_id": ("==", "in")}
POOL = 50  # candidates a post-selection reads when the settings do not say (SearchConfig's default)


Selection = PassageFilter  # what a filter selects: babelrag's own passage filter, read as the policy above


def keeps(selection: Selection, hit: Hit) -> bool:
    """Whether a found passage is in the selection's scope and pages (country and languages were searched)."""
    return ((selection.scope is None or hit.passage.scope == selection.scope) and
            (not selection.doc_ids or hit.passage.doc_id in selection.doc_ids))


def selection_of(conditions: Iterable[tuple[str, str, Any]]) -> Selection:
    """``(field, operator, value)`` conditions, all of which must hold."""
    selection = Selection()
    for field, operator, value in conditions:
        name = field.removeprefix("meta.")
        if name not in OPERATORS:
            raise ConfigError(f"filters: no filter on '{name[:64]}' (babelrag filters on {', '.join(OPERATORS)})")
        if operator not in OPERATORS[name]:
            raise ConfigError(f"filters: {name} takes {' or '.join(OPERATORS[name])}, not '{str(operator)[:8]}'")
        values = tuple(str(v) for v in value) if operator == "in" else (str(value),)
        if name == "country":
            selection = replace(selection, country=values[0])
        elif name == "lang":
            selection = replace(selection, langs=values)
        elif name == "scope":
            if values[0] not in ("global", "local"):
                raise ConfigError("filters: scope is global or local")
            selection = replace(selection, scope=values[0])
        else:
            selection = replace(selection, doc_ids=values)
    return selection


def haystack_conditions(filters: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
    """Haystack's filter syntax: ``{"field", "operator", "value"}`` or ``{"operator": "AND", "conditions"}``."""
    if "conditions" in filters:
        if str(filters.get("operator", "")).upper() != "AND":
            raise ConfigError("filters: only AND joins conditions (babelrag has no OR or NOT filter)")
        return [c for condition in filters["conditions"] for c in haystack_conditions(condition)]
    try:
        return [(str(filters["field"]), str(filters["operator"]), filters["value"])]
    except KeyError as error:
        raise ConfigError(f"filters: a condition needs field, operator and value ({error.args[0]} missing)") from None


def search_selected(kb: KB, query: str, selection: Selection, *, k: int, settings: Mapping[str, Any],
                    **options: Any) -> list[Hit]:
    """``kb.search`` under a selection: country and languages as the search's own, scope and pages chosen
    among its candidates (``options``: ``preset``, ``country``, ``lang``)."""
    settings = dict(settings)
    if selection.langs:
        settings["langs"] = list(selection.langs)
    if selection.country:
        options["country"] = selection.country
    selecting = selection.scope is not None or bool(selection.doc_ids)
    depth = max(k, int(settings.get("candidates", POOL))) if selecting else k
    hits = kb.search(query, k=depth, settings=settings, **options).evidence.hits
    return [hit for hit in hits if keeps(selection, hit)][:k]
