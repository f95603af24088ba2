"""A configuration written in sections, each method's parameters beside its name.

    query:     {strategy: hyde, hyde_lang: pivot, extra_paths: [pivot, {strategy: delta, delta: {aliases: 2}}]}
    retrieval: {mode: hybrid, rerank: learned, candidates: 50}
    selection: {merge: max, threshold: auto, collapse: page, k: 10}
    answer:    {context: dkm, dkm_parts: translated, generate_k: 3}

``query`` is a union of the query strategies' parameter models told apart by ``strategy`` (each extra path
likewise); ``answer`` one of the context strategies' by ``context``. So a method's parameter set beside
another method fails at parse time (``query.kb_languages.hyde_lang: Extra inputs are not permitted``),
which the flat fields cannot say. The sections map onto the flat fields that every preset, ``--set key``
and service setting keeps using; a section's value wins over a flat one (it is the later, more specific).
"""
from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model

import babelrag.context  # noqa: F401 - registers the context strategies
import babelrag.models.rerank  # noqa: F401 - registers the rerankers
import babelrag.models.registry  # noqa: F401 - registers the translators
import babelrag.strategies  # noqa: F401 - registers the query strategies
from babelrag.errors import ConfigError, shown
from babelrag.registry import CONTEXTS, STRATEGIES, Entry, Registry
from babelrag.search_config import SearchConfig

NO_CONTEXT = "none"  # no retrieval at all: the no-RAG baseline
SHARED = {
    "query": ("strategy", "extra_paths", "lang_scope", "pivot", "llm", "translator"),
    "retrieval": ("mode", "fusion", "rrf_k", "keyword_weight", "candidates", "rerank", "country_filter", "langs"),
    "selection": ("merge", "threshold", "collapse", "k"),
    "answer": ("context", "generate_k", "generator", "answer_tokens", "conversation_llm"),
}
SECTIONS = tuple(SHARED)


def _fields(names: tuple[str, ...]) -> dict[str, Any]:
    """The flat fields' types, defaults and bounds, for a section model."""
    return {name: (SearchConfig.model_fields[name].annotation, SearchConfig.model_fields[name]) for name in names}


def _method_model(section: str, tag: str, entry: Entry | None, shared: tuple[str, ...]) -> type[BaseModel]:
    """One method's section: its tag, the section's shared fields and the method's own parameters."""
    own = tuple(entry.params.model_fields) if entry is not None else ()
    return create_model(f"{section}_{tag}", __config__=ConfigDict(extra="forbid"),
                        **{shared[0]: (Literal[tag], tag)}, **_fields(shared[1:] + own))


def _union(section: str, registry: Registry, shared: tuple[str, ...], extra: tuple[str, ...] = ()) -> TypeAdapter:
    models = [_method_model(section, e.name, e, shared) for e in registry.entries()]
    models += [_method_model(section, tag, None, shared) for tag in extra]
    return TypeAdapter(Annotated[Union[tuple(models)], Field(discriminator=shared[0])])  # noqa: UP007


@cache
def _adapters() -> dict[str, TypeAdapter]:
    """Built on first use, from every registered method (a package registering later is not seen)."""
    plain = {name: TypeAdapter(create_model(name, __config__=ConfigDict(extra="forbid"), **_fields(SHARED[name])))
             for name in ("retrieval", "selection")}
    return {"query": _union("query", STRATEGIES, SHARED["query"]),
            "extra_path": _union("extra_path", STRATEGIES, ("strategy",)),
            "answer": _union("answer", CONTEXTS, SHARED["answer"], (NO_CONTEXT,)), **plain}


def _checked(adapter: TypeAdapter, values: Any, where: str) -> dict[str, Any]:
    try:
        return adapter.validate_python(values).model_dump(exclude_unset=True)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join((where, *map(shown, first["loc"])))  # keys the user wrote, cut
        raise ConfigError(f"{field}: {first['msg']}") from error


def _tagged(values: Any, where: str, field: str, default: str) -> dict[str, Any]:
    """A method's section with its tag checked against the registry first (the message names the known
    methods and cuts what the user wrote)."""
    if not isinstance(values, dict):
        raise ConfigError(f"{where}: a mapping of settings")
    tagged = {field: default, **values}
    if field == "context" and tagged[field] == NO_CONTEXT:
        return tagged
    (STRATEGIES if field == "strategy" else CONTEXTS).entry(str(tagged[field]), f"{where}.{field}",
                                                            also=(NO_CONTEXT,) if field == "context" else ())
    return tagged


def flat_values(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with its sections (if any) checked and mapped onto the flat fields."""
    if not any(name in values for name in SECTIONS):
        return values
    flat = {key: value for key, value in values.items() if key not in SECTIONS}
    adapters = _adapters()
    if "query" in values:
        query = _tagged(values["query"], "query", "strategy", flat.get("strategy", SearchConfig().strategy))
        extra_paths = query.pop("extra_paths", None)
        flat.update(_checked(adapters["query"], query, "query"), strategy=query["strategy"])
        if extra_paths is not None:
            names = []
            for index, path in enumerate([extra_paths] if isinstance(extra_paths, (str, dict)) else extra_paths):
                where = f"query.extra_paths.{index}"
                path = _tagged({"strategy": path} if isinstance(path, str) else path, where, "strategy", "")
                params = _checked(adapters["extra_path"], path, where)
                names.append(params.pop("strategy"))
                flat.update(params)
            flat["extra_paths"] = names
    if "answer" in values:
        answer = _tagged(values["answer"], "answer", "context", flat.get("context", SearchConfig().context))
        flat.update(_checked(adapters["answer"], answer, "answer"), context=answer["context"])
    for name in ("retrieval", "selection"):
        if name in values:
            flat.update(_checked(adapters[name], values[name], name))
    return flat

