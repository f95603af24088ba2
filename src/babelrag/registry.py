"""One registry pattern for every pluggable kind: query strategies, context strategies, rerankers, LLM
backends, translators, embedders and benchmark datasets.

An entry declares its name, the pydantic model of the parameters it reads, and its ``Facts``: what it
costs and what it may be used for. Validators, the service's whitelists, cost accounting and reports read
these facts instead of testing names, so a new method is one file that registers itself.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict

from babelrag.errors import ConfigError, shown

T = TypeVar("T")


class NoParams(BaseModel):
    """The parameters of an entry that reads none."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class Facts:
    """What an entry does that the rest of the system must know without naming it.

    ``paths``: how a query strategy plans — ``one`` path, ``several`` merged paths, its ``own`` rounds
    (a loop that ranks its own evidence), or ``resolved`` per question (a profile picks the configuration).
    ``llm_calls_per_question`` / ``llm_calls_per_passage``: model calls it makes at most (0: none).
    ``client_choosable``: clients of the service may pick it (for query strategies: as an extra path).
    ``max_passages``: the most passages a client may hand it (each passage costs model calls).
    ``trace_stages``: the trace stages it writes when it runs.
    ``seconds_budget``: the parameter (``section.field``) that caps the model seconds it spends on one
    question; the service bounds it by the request's deadline.
    """

    paths: Literal["one", "several", "own", "resolved"] = "one"
    llm_calls_per_question: int = 0
    llm_calls_per_passage: int = 0
    client_choosable: bool = False
    max_passages: int = 10
    trace_stages: tuple[str, ...] = ()
    seconds_budget: str = ""

    @property
    def calls_llm(self) -> bool:
        return bool(self.llm_calls_per_question or self.llm_calls_per_passage)


@dataclass(frozen=True)
class Entry(Generic[T]):
    """One registered implementation. ``make`` builds it from its arguments (models, paths, specs);
    ``argument``: the entry is written ``NAME:ARGUMENT`` (``cross-encoder:PATH``) and ``make`` receives the
    argument first."""

    name: str
    make: Callable[..., T]
    params: type[BaseModel] = NoParams
    facts: Facts = Facts()
    argument: str = ""
    aliases: tuple[str, ...] = ()
    about: str = ""

    def params_of(self, config: BaseModel) -> BaseModel:
        """This entry's parameters, read from a configuration's fields of the same names."""
        return self.params.model_validate({name: getattr(config, name) for name in self.params.model_fields})


@dataclass
class Registry(Generic[T]):
    """Entries of one kind, by name. ``field`` is the configuration field that names them (for errors)."""

    kind: str
    field: str
    _entries: dict[str, Entry[T]] = field(default_factory=dict)

    def register(self, name: str, *, params: type[BaseModel] = NoParams, facts: Facts = Facts(), argument: str = "",
                 aliases: tuple[str, ...] = (), about: str = "") -> Callable[[Callable[..., T]], Callable[..., T]]:
        """A decorator that registers a class or factory under ``name``."""
        def add(make: Callable[..., T]) -> Callable[..., T]:
            self.add(Entry(name, make, params, facts, argument, aliases, about))
            return make
        return add

    def add(self, entry: Entry[T]) -> None:
        for name in (entry.name, *entry.aliases):
            if name in self._entries and self._entries[name].make is not entry.make:
                raise ValueError(f"{self.kind} '{name}' is registered twice")
            self._entries[name] = entry

    def entry(self, spec: str, field: str | None = None, also: tuple[str, ...] = ()) -> Entry[T]:
        """The entry ``spec`` names (``NAME`` or ``NAME:ARGUMENT`` for a prefix entry); a ``ConfigError``
        naming the field (default: the registry's) and the known names (``also``: other words the field
        takes) otherwise."""
        found = self.find(spec)
        if found is None:
            known = ", ".join((*also, self.known()))
            raise ConfigError(f"{field or self.field}: unknown {self.kind} '{shown(spec)}' (known: {known})")
        return found

    def find(self, spec: str) -> Entry[T] | None:
        head, sep, argument = str(spec).partition(":")
        if spec in self._entries and not self._entries[spec].argument:
            return self._entries[spec]
        entry = self._entries.get(head)
        return entry if entry is not None and entry.argument and sep and argument else None

    def make(self, spec: str, *args: Any, **kwargs: Any) -> T:
        """Build what ``spec`` names; a prefix entry receives its argument first."""
        entry = self.entry(spec)
        if entry.argument:
            return entry.make(str(spec).partition(":")[2], *args, **kwargs)
        return entry.make(*args, **kwargs)

    def facts(self, spec: str) -> Facts:
        return self.entry(spec).facts

    def names(self) -> list[str]:
        """Registered names (aliases included), in registration order."""
        return list(self._entries)

    def entries(self) -> list[Entry[T]]:
        """Each entry once, without its aliases."""
        return list({id(e): e for e in self._entries.values()}.values())

    def known(self) -> str:
        """The names, aliases and argument forms (``cross-encoder:PATH``), for help texts and errors."""
        return ", ".join(f"{e.name}:{e.argument}" if e.argument else ", ".join((e.name, *e.aliases))
                         for e in self.entries())

    def __contains__(self, spec: object) -> bool:
        return isinstance(spec, str) and self.find(spec) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)


# The kinds. Each lives here, below everything that registers into it; a package's ``__init__`` imports
# its implementation files, and that import is the registration.
STRATEGIES: Registry[Any] = Registry("query strategy", "strategy")
CONTEXTS: Registry[Any] = Registry("context strategy", "context")
RERANKERS: Registry[Any] = Registry("reranker", "rerank")
LLM_BACKENDS: Registry[Any] = Registry("LLM backend", "llm")
TRANSLATORS: Registry[Any] = Registry("translator", "translator")
EMBEDDERS: Registry[Any] = Registry("embedder", "embedder")
DATASETS: Registry[Any] = Registry("dataset", "datasets")
