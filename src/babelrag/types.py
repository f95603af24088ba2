"""The values that flow through every stage: question → requests → rankings → evidence, with a trace.

They are plain frozen dataclasses so any stage, test or report can build and compare them
without the engine; ``to_dict`` gives the JSON shape the trace files and the CLI print.
"""
from __future__ import annotations

import time
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Scope = Literal["global", "local"]
GLOBAL = "global"


@dataclass(frozen=True, slots=True)
class Question:
    """What a user asked; ``lang`` is detected when not given, ``country`` drives the scope filter."""

    text: str
    lang: str | None = None
    country: str | None = None
    id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Passage:
    """The retrieval unit (a chunk). ``doc_id`` is its page: every chunk and language version shares it."""

    id: str
    text: str
    doc_id: str
    lang: str
    title: str = ""
    country: str | None = None
    scope: Scope = "local"
    source: str = ""
    record_id: str = ""
    chunk: int = 0
    lang_confidence: float | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PassageFilter:
    """Which passages a path may return. ``country`` means that country *plus* scope=global passages."""

    country: str | None = None
    langs: tuple[str, ...] = ()
    scope: Scope | None = None
    doc_ids: tuple[str, ...] = ()

    def is_empty(self) -> bool:
        return not (self.country or self.langs or self.scope or self.doc_ids)


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """One path: a text in a language over a KB and a filter, labelled for the trace.

    ``rerank_text`` is what the path's candidates are re-scored against (default: ``text``; HyDE
    re-scores against the question so max-merge compares like with like). ``segments`` are
    (text, language) pieces for keyword analysis when one query mixes languages (DELTA).
    """

    text: str
    kb: str
    lang: str | None = None
    filter: PassageFilter = PassageFilter()
    label: str = "as_written"
    rerank_text: str | None = None
    segments: tuple[tuple[str, str], ...] = ()
    # how the text came about: the question itself, a translation of it, or a model's text (HyDE, DELTA's
    # fused query); the learned relevance model weighs evidence from each differently
    origin: Literal["as_written", "translated", "generated"] = "as_written"
    # the question this path serves, as asked: a learned model scores a question it was fitted on with the
    # fold model that held it out (set by the searcher on every path)
    asked: str | None = None
    # which index the path searches: the KB's passages, or their pivot-language copies made at ingest
    # (ingest/pivot_copies.py); a copy's hit stands for its original passage once the path is re-scored
    index: Literal["passages", "pivot_copies"] = "passages"


def fusion_z_signal(arm: str) -> str:
    """The signal under which fusing a path's arms (``retrieve/fusion.py: fuse_arms``) leaves an arm's unweighted
    z-score on every fused candidate (the learned stage rebuilds the hybrid preset's order from them)."""
    return f"{arm}_fusion_z"


@dataclass(frozen=True, slots=True, init=False)
class Hit:
    """A passage with the score the named scorer gave it. ``terms`` (the ids of its keyword terms, each once; the
    stores give an ``array("I")``, shared with later searches: read, never changed) ride along for re-scoring
    only; ``signals`` keep what each retrieval arm said about it (``dense``/``bm25`` scores and ``*_rank``
    positions, and ``cosine``, its cosine to the text its path is re-scored against) for re-scoring."""

    passage: Passage
    score: float
    path: str
    terms: Collection[int] | None = field(default=None, compare=False, repr=False)
    signals: Mapping[str, float] = field(default_factory=dict, compare=False, repr=False)

    def __init__(self, passage: Passage, score: float, path: str, terms: Collection[int] | None = None,
                 signals: Mapping[str, float] | None = None) -> None:
        # Frozen all the same: the fields are set once here, through their slots. The generated __init__ of a frozen
        # dataclass goes through ``object.__setattr__`` per field (0.65 µs a hit against 0.39), and a search builds
        # about 270 hits (each arm's, the fused ones, the re-scored ones).
        _set_passage(self, passage)
        _set_score(self, score)
        _set_path(self, path)
        _set_terms(self, terms)
        _set_signals(self, {} if signals is None else signals)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.passage.id, "doc_id": self.passage.doc_id, "lang": self.passage.lang,
                "score": round(float(self.score), 6), "path": self.path}


_set_passage, _set_score, _set_path, _set_terms, _set_signals = (
    Hit.__dict__[name].__set__ for name in ("passage", "score", "path", "terms", "signals"))


@dataclass(frozen=True, slots=True)
class Ranking:
    """Hits in descending score order. ``scorer`` names the scale, so merges can refuse mixing scales."""

    label: str
    scorer: str
    hits: tuple[Hit, ...] = ()

    def __len__(self) -> int:
        return len(self.hits)

    def doc_ids(self) -> list[str]:
        return [h.passage.doc_id for h in self.hits]

    def to_trace(self, limit: int) -> dict[str, Any]:
        """The compact form stage records keep: ``[passage id, score]`` pairs (runs store thousands)."""
        return {"label": self.label, "scorer": self.scorer,
                "hits": [[h.passage.id, round(float(h.score), 5)] for h in self.hits[:limit]]}


def ended_early(finish: str, completion_tokens: int, max_tokens: int) -> bool:
    """Whether a model answer was cut by its token budget: the backend's own reason when it gives one,
    else its token count (an endpoint that reports neither counts 0 tokens and is taken at its word)."""
    return finish == "length" if finish else completion_tokens >= max_tokens


@dataclass(slots=True)
class Step:
    """One stage's record: what it did, on which path, how long it took, and its data."""

    stage: str
    label: str
    seconds: float
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class LLMCall:
    """One model call a method makes. A cached call keeps the original's tokens and seconds (the
    method's cost) and says it was served from the cache (what this run actually paid)."""

    role: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    cached: bool = False
    finish: str = ""  # "stop", "length" (the token budget), "stopped" (by the caller or the deadline), "" unsaid

    def ended_early(self, max_tokens: int) -> bool:
        return self.finish == "stopped" or ended_early(self.finish, self.completion_tokens, max_tokens)


@dataclass(frozen=True, slots=True)
class Failure:
    """A model answer a method could not use. Failures are data: the method takes its defined
    ``fallback``, the run goes on, and evaluation counts them per cell."""

    stage: str  # translate | hyde | delta | classifier | anchors | judge | refine | planner | critic | ...
    reason: str
    fallback: str


@dataclass(slots=True)
class Trace:
    """Everything a search did, in order. Evaluation, reports and the API read it; nothing recomputes it."""

    steps: list[Step] = field(default_factory=list)
    llm_calls: list[LLMCall] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)

    def fail(self, stage: str, reason: str, fallback: str) -> None:
        self.failures.append(Failure(stage, reason[:300], fallback))

    def extend(self, other: Trace) -> None:
        """Append another trace's record (work done apart, e.g. on another thread)."""
        self.steps += other.steps
        self.llm_calls += other.llm_calls
        self.failures += other.failures

    def warnings(self) -> list[str]:
        """One line per failure, for people (CLI, service responses)."""
        return [f"{f.stage} failed ({f.reason}); {f.fallback}" for f in self.failures]

    @contextmanager
    def step(self, stage: str, label: str = "", **data: Any) -> Iterator[dict[str, Any]]:
        """Time a stage; the caller fills the yielded dict with what the stage produced."""
        record = Step(stage, label, 0.0, dict(data))
        start = time.perf_counter()
        try:
            yield record.data
        finally:
            record.seconds = time.perf_counter() - start
            self.steps.append(record)

    def seconds(self, stage: str | None = None) -> float:
        return sum(s.seconds for s in self.steps if stage is None or s.stage == stage)

    def llm_totals(self) -> dict[str, float]:
        return {"llm_calls": len(self.llm_calls),
                "llm_tokens": sum(c.prompt_tokens + c.completion_tokens for c in self.llm_calls),
                "llm_seconds": sum(c.seconds for c in self.llm_calls),
                "llm_cached": sum(c.cached for c in self.llm_calls)}

    def to_dict(self) -> dict[str, Any]:
        """A copy as plain data, as ``asdict`` makes it; the step records (most of a trace: every ranking's hits)
        copied by ``_plain``, since ``asdict`` deep-copies each number and string one call at a time (0.4 ms of a
        search's response, and every row of an evaluation run)."""
        return {"steps": [{"stage": s.stage, "label": s.label, "seconds": s.seconds, "data": _plain(s.data)}
                          for s in self.steps],
                "llm_calls": [asdict(c) for c in self.llm_calls], "failures": [asdict(f) for f in self.failures]}


_ATOMS = (str, int, float, bool, type(None))


def _plain(value: Any) -> Any:
    """``asdict``'s copy of a record's data: dicts, lists and tuples copied (walked in this function), strings and
    numbers shared (immutable: ``deepcopy`` returns them as they are), anything else as ``asdict`` copies it."""
    kind = type(value)
    if kind in _ATOMS:
        return value
    if kind is dict:
        return {_plain(key): _plain(item) for key, item in value.items()}
    if kind is list:
        return [_plain(item) for item in value]
    if kind is tuple:
        return tuple(_plain(item) for item in value)
    return asdict(_Copied(value))["value"]


@dataclass(slots=True)
class _Copied:
    """Carries a value of another kind through ``asdict`` (a dataclass becomes a dict; the rest is deep-copied)."""

    value: Any


@dataclass(frozen=True, slots=True)
class SearchResult:
    """The evidence handed on (after merge, threshold and top-k) and the trace that produced it."""

    question: Question
    evidence: Ranking
    trace: Trace
    candidates: int = 0

    @property
    def passed(self) -> int:
        return len(self.evidence)

    def to_dict(self) -> dict[str, Any]:
        return {"question": asdict(self.question),
                "evidence": [dict(h.to_dict(), text=h.passage.text, title=h.passage.title)
                             for h in self.evidence.hits],
                "passed": self.passed, "warnings": self.trace.warnings(), "trace": self.trace.to_dict()}


@dataclass(frozen=True, slots=True)
class ContextPassage:
    """A passage as the generator will read it: possibly translated or rewritten, with tags.

    ``number`` is how the prompt names it ([1], [2], …), so a citation maps back to its passage.
    """

    number: int
    passage: Passage
    text: str
    lang: str
    translated: bool = False
    kind: str = "retrieved"  # retrieved | translated | refined | untranslated (its translation failed)
    tags: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Context:
    strategy: str
    passages: tuple[ContextPassage, ...] = ()
    instruction: str = ""  # extra generator guidance a context strategy needs (QTT's trust order)


@dataclass(frozen=True, slots=True)
class Answer:
    """Generated text only (never the prompt), its citations, and everything that led to it."""

    question: Question
    text: str
    citations: tuple[ContextPassage, ...]
    cited_how: str  # "cited" (the model named them) | "attributed" (overlap with the answer) | "none"
    context: Context
    search: SearchResult | None
    trace: Trace

    def to_dict(self) -> dict[str, Any]:
        return {"question": asdict(self.question), "answer": self.text, "cited_how": self.cited_how,
                "citations": [{"number": c.number, "id": c.passage.id, "doc_id": c.passage.doc_id,
                               "lang": c.lang, "source_lang": c.passage.lang, "translated": c.translated,
                               "kind": c.kind, "text": c.text} for c in self.citations],
                "context": {"strategy": self.context.strategy, "passages": len(self.context.passages)},
                "evidence": [h.to_dict() for h in self.search.evidence.hits] if self.search else [],
                "warnings": self.trace.warnings(), "trace": self.trace.to_dict()}
