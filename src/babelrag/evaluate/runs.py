"""Evaluation runs: one configuration over a golden set, into a run folder.

A run folder holds ``config.json`` (frozen: configuration, golden set, and the identity of every
index searched), ``traces.jsonl`` (one line per question, written as it goes), ``metrics.json``
and, only at the very end, ``COMPLETE``. Re-running the same configuration resumes an interrupted
folder and reuses a complete one; another configuration, golden set or index is refused.

Failures are data, bugs are not: a model failure degrades to the method's fallback inside the
pipeline and is counted from the trace; a model or endpoint failure no fallback caught (the typed
``MODEL_FAILURES``: an LLM error, a deadline) is recorded on that question's row (scored as
nothing found) and the run goes on. Anything else — a configuration error, or a bug in our own code
such as a ``TypeError`` — stops the run with its traceback; rows are written in order, so the
question it stopped at has none and a resumed run starts there.

Timing (``timing``): ``cold`` (default) measures each question's own work — no candidates reused
from a cache, its query vectors embedded afresh, its hits' passages read from the store — after an
untimed warm-up that loads the analyzers; model calls count at their original cost, so
``latency_ms = retrieval_ms + model_ms`` does not depend on what earlier runs left in the caches.
``warm`` reuses cached candidates and query vectors (fast sweeps) and says so in the metrics.

Concurrency (``concurrency``): N questions in flight on threads, across the run's KBs (an LLM endpoint
with N slots, or a remote API, works on N at once). Rows are written in a sequential run's order
whatever finishes first, so the folder, its resumption and the traces (apart from seconds) are those
of a sequential run; a question's times then include waiting for shared cores and model slots (and
cold runs keep query vectors other questions embedded and passages their searches read), and the metrics
say so.
"""
from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from babelrag import __version__
from babelrag.concurrency import in_order
from babelrag.config import SearchConfig, context_facts, finding_calls_llm
from babelrag.deadline import DeadlineExceeded
from babelrag.errors import BabelragError, ConfigError
from babelrag.evaluate.answers import answer_language_correct, char3gram_recall, flexible_exact_match
from babelrag.evaluate.cells import by_cell
from babelrag.evaluate.golden import GoldenQuestion
from babelrag.evaluate.leakage import mark_seen, seen_questions
from babelrag.evaluate.loops import loop_summary
from babelrag.evaluate.metrics import retrieval_scores
from babelrag.generate.answerer import Answerer
from babelrag.generate.generator import strip_citations
from babelrag.jsonl import numbered_lines
from babelrag.kb import KnowledgeBase
from babelrag.lang import analyzers
from babelrag.models.llm import build_llm, slots_of
from babelrag.models.llm_types import LLMError
from babelrag.paths import cache_dir
from babelrag.progress import progress
from babelrag.retrieve.cache import RetrievalCache
from babelrag.retrieve.pipeline import Searcher
from babelrag.types import Answer, Question, SearchResult, Trace

COMPLETE = "COMPLETE"
FROZEN = {"config": "configuration", "golden": "golden set", "index": "--kb choice", "answer": "answer setting",
          "indexes": "index contents (an index rebuilt or changed since, or another store)",
          "timing": "timing mode"}  # what must match to resume a folder
Timing = Literal["cold", "warm"]
TIMING_NOTES: dict[str, str] = {
    "cold": "cold: each question's own retrieval work (no cached candidates, query vectors embedded afresh, "
            "passages read from the store, analyzers warmed up before timing); model calls at their original cost",
    "warm": "warm: candidates and query vectors reused from caches (sweep mode); retrieval times measure the caches",
}
CONCURRENCY_NOTE = ("{n} questions in flight: each question's times include waiting for shared cores and model "
                    "slots, and a cold run keeps what questions in flight together embedded and read; compare "
                    "latencies between runs at the same concurrency")
ABORT_AFTER = 10  # this many questions failing in a row, none scored yet: a broken setup, not bad answers
# what a model or endpoint can do to one question that no method's fallback caught: recorded, never fatal
MODEL_FAILURES = (LLMError, DeadlineExceeded)


@dataclass(frozen=True)
class RunResult:
    name: str
    folder: Path
    rows: list[dict[str, Any]]
    metrics: dict[str, Any]


def question_row(question: GoldenQuestion, result: SearchResult | None, trace: Trace, seconds: float,
                 scored: bool = True, depth: int = 10) -> dict[str, Any]:
    """``scored=False``: no retrieval metrics (no-RAG retrieves nothing by design); ``depth``: the
    configuration's k (no recall@20 for a top-10 list)."""
    waited = sum(c.seconds for c in trace.llm_calls if not c.cached)  # model time this run really spent
    retrieval_ms = max(0.0, seconds - waited) * 1000
    model_ms = sum(c.seconds for c in trace.llm_calls) * 1000  # at the original cost, cached or not
    row = {"id": question.id, "kb": question.kb, "lang": question.lang, "country": question.country,
           "tags": dict(question.tags), "gold_pages": list(question.gold_pages),
           "latency_ms": retrieval_ms + model_ms, "retrieval_ms": retrieval_ms, "model_ms": model_ms,
           **trace.llm_totals(), "failures": len(trace.failures), "failed": float(bool(trace.failures)),
           "failure_stages": sorted({f.stage for f in trace.failures})}
    pages = result.evidence.doc_ids() if result is not None else []
    row.update(ranked_pages=pages, evidence=[h.to_dict() for h in result.evidence.hits] if result else [],
               docs_passed=result.passed if result else 0)
    if scored:
        row.update(retrieval_scores(pages, question.gold_pages, depth))
    return row


def _answer_fields(question: GoldenQuestion, answer: Answer | None, languages: Sequence[str]) -> dict[str, Any]:
    """Answer metrics on the generated text only (never the prompt: docs/methods.md#pitfall-echoed-prompt), against the gold
    answers in the question's language; none there → not scored, counted as ``answer_no_reference``."""
    text = answer.text if answer else ""
    scored = strip_citations(text)
    references = question.answers_in(question.lang)
    lang_ok = answer_language_correct(scored, question.lang, languages) if answer else False
    return {"answer": text, "answer_scored": scored, "cited_how": answer.cited_how if answer else "none",
            "citations": [c.passage.id for c in answer.citations] if answer else [],
            "answer_char3": char3gram_recall(scored, references) if references else None,
            "answer_em": float(flexible_exact_match(scored, references)) if references else None,
            "answer_lang_ok": lang_ok, "answer_lang_unclassified": float(lang_ok is None),
            "answer_no_reference": float(not references)}


def golden_fingerprint(questions: Sequence[GoldenQuestion]) -> str:
    digest = hashlib.sha256()
    for q in questions:
        digest.update(q.model_dump_json().encode())
    return digest.hexdigest()[:16]


def read_jsonl_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSONL file split on "\\n" only (``str.splitlines`` also splits on U+2028 inside strings);
    a line cut by an interruption ends the list: that question runs again."""
    rows = []
    if path.exists():
        for _, line in numbered_lines(path.read_text(encoding="utf-8")):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                break
    return rows


def _with_new_defaults(before: dict[str, Any], now: dict[str, Any]) -> dict[str, Any]:
    """A frozen config written before a field existed: that field at its default is the behaviour the
    run had, so it may resume; any other value is another configuration."""
    defaults = SearchConfig().model_dump(mode="json")
    return {**{k: defaults[k] for k in now if k not in before and k in defaults}, **before}


def seen_ids(by_index: dict[str, list[GoldenQuestion]], config: SearchConfig, store: str | None,
             answer: bool) -> dict[str, str]:
    """Question id → why, for every question this configuration was tuned or fitted on (``leakage.py``)."""
    if answer and config.context == "none":
        return {}
    seen: dict[str, str] = {}
    for name, questions in by_index.items():
        with KnowledgeBase.open(name, store) as kb:
            seen.update(mark_seen(questions, seen_questions(kb, config, Searcher(kb, config).relevance)))
    return seen


def index_identities(names: Sequence[str], store: str | None) -> dict[str, Any]:
    identities = {}
    for name in dict.fromkeys(names):
        with KnowledgeBase.open(name, store) as kb:
            identities[name] = kb.identity()
    return identities


class _Runner:
    """One KB's questions: the searcher or answerer, cold or warm, and a row per question."""

    def __init__(self, kb: KnowledgeBase, config: SearchConfig, answer: bool, timing: Timing):
        cache = RetrievalCache(cache_dir() / "retrieval.sqlite") if timing == "warm" else None
        self.kb, self.timing, self.depth = kb, timing, config.k
        self.answerer = Answerer(kb, config, cache) if answer else None
        self.searcher = None if answer else Searcher(kb, config, cache)
        self.scored = not (answer and config.context == "none")
        self.languages = sorted(set(kb.manifest.languages.all) | {"en"})
        if timing == "cold":
            self._warm_up(config)

    def _warm_up(self, config: SearchConfig) -> None:
        """Load every analyzer and touch the engine once, untimed, so no question pays for loading. A
        model failure here is left to the questions (each records its own); anything else stops the run."""
        try:
            for lang in self.kb.manifest.languages.all:
                analyzers.tokens("warm up", lang)
            if finding_calls_llm(config) or context_facts(config.context).calls_llm or self.answerer is not None:
                build_llm(config.llm)  # loading a local model is not a question's work
                if self.answerer is not None:
                    build_llm(config.generator or config.llm)
            if config.context != "none" or self.searcher is not None:
                plain = config.model_copy(update={"strategy": "as_written", "extra_paths": ()})
                Searcher(self.kb, plain).search(Question("warm up", lang="en"))
        except MODEL_FAILURES:  # left to the questions (each records its own)
            pass
        self.kb.forget_query_vectors()
        self.kb.forget_passages()

    def row(self, question: GoldenQuestion, alone: bool = True) -> dict[str, Any]:
        """``alone``: no other question in flight, so forgetting query vectors costs nobody else."""
        if self.timing == "cold" and alone:
            self.kb.forget_query_vectors()
            self.kb.forget_passages()
        start = time.perf_counter()
        if self.answerer is not None:
            reply = self.answerer.ask(question.as_question())
            row = question_row(question, reply.search, reply.trace, time.perf_counter() - start, self.scored,
                               self.depth)
            row.update(_answer_fields(question, reply, self.languages))
            row["trace"] = reply.trace.to_dict()
        else:
            assert self.searcher is not None
            result = self.searcher.search(question.as_question())
            row = question_row(question, result, result.trace, time.perf_counter() - start, depth=self.depth)
            row["trace"] = result.trace.to_dict()
        return row

    def failed_row(self, question: GoldenQuestion, error: Exception, seconds: float) -> dict[str, Any]:
        """A model failure no fallback caught: the question scores as nothing found, and says why."""
        trace = Trace()
        trace.fail("question", f"{type(error).__name__}: {error}", "no result for this question")
        row = question_row(question, None, trace, seconds, self.scored, self.depth)
        if self.answerer is not None:
            row.update(_answer_fields(question, None, self.languages))
        row["trace"] = trace.to_dict()
        return row


def default_concurrency(config: SearchConfig, answer: bool) -> int:
    """Retrieval alone runs one question at a time (its latencies stay clean, and it is CPU-bound);
    a method that calls an LLM keeps as many questions in flight as the model has slots."""
    uses_llm = answer or finding_calls_llm(config) or context_facts(config.context).calls_llm
    return slots_of(config.generator or config.llm) if uses_llm else 1


def _outcome(runners: dict[str, _Runner], alone: bool) -> Callable[[tuple[str, GoldenQuestion]],
                                                                    tuple[str, GoldenQuestion, dict[str, Any]]]:
    """Each question's row, or the model failure (judged later, in order, where the run decides what it
    means); any other exception propagates and stops the run."""
    def work(job: tuple[str, GoldenQuestion]) -> tuple[str, GoldenQuestion, dict[str, Any]]:
        kb_name, question = job
        start = time.perf_counter()
        try:
            return kb_name, question, runners[kb_name].row(question, alone)
        except MODEL_FAILURES as error:  # one question's model failure is data
            return kb_name, question, {"_error": error, "_seconds": time.perf_counter() - start}
    return work


def run_config(name: str, config: SearchConfig, questions: Sequence[GoldenQuestion], folder: Path,
               store: str | None = None, index: str | None = None, answer: bool = False,
               timing: Timing = "cold", report_split: str | None = None,
               concurrency: int | None = None) -> RunResult:
    """Evaluate ``config`` on ``questions`` (with ``answer``: generate and score answers too).
    ``index`` overrides each question's own index/kb. ``report_split``: the headline metrics cover
    only questions tagged with that split (the others are summarised apart, labelled).
    ``concurrency``: questions in flight (default: ``default_concurrency``)."""
    concurrency = concurrency or default_concurrency(config, answer)
    if concurrency < 1:
        raise ConfigError(f"concurrency: at least 1 question in flight (got {concurrency})")
    folder.mkdir(parents=True, exist_ok=True)
    by_index: dict[str, list[GoldenQuestion]] = {}
    for q in questions:
        by_index.setdefault(index or q.index or q.kb, []).append(q)
    seen = seen_ids(by_index, config, store, answer)
    if seen and all(q.id in seen for q in in_split_questions(questions, report_split)):
        why = sorted(set(seen.values()))
        raise ConfigError(f"{name}: every question to be scored was seen by this configuration ({'; '.join(why)}); "
                          f"scoring them would flatter it. Score questions it was not tuned on (e.g. the test split)")
    frozen = {"name": name, "config": config.model_dump(mode="json"), "golden": golden_fingerprint(questions),
              "questions": len(questions), "store": store, "index": index, "answer": answer, "timing": timing,
              "indexes": index_identities(list(by_index), store), "babelrag_version": __version__}
    config_file = folder / "config.json"
    if config_file.exists():
        before = json.loads(config_file.read_text(encoding="utf-8"))
        before["config"] = _with_new_defaults(before.get("config") or {}, frozen["config"])
        before.setdefault("timing", "warm")  # folders from before timing existed reused the caches
        differing = [k for k in FROZEN if before.get(k) != frozen[k]]
        if differing:
            raise ConfigError(f"run folder {folder} was run with another "
                              f"{' and '.join(FROZEN[k] for k in differing)}; use a new --out")
        if (folder / COMPLETE).exists():  # nothing to run; the metrics follow this call's split
            rows = read_jsonl_rows(folder / "traces.jsonl")
            stored = json.loads((folder / "metrics.json").read_text())["configs"][name]
            return RunResult(name, folder, rows, {**run_metrics(rows, report_split), "timing": stored["timing"]})
    else:
        config_file.write_text(json.dumps(frozen, indent=2, ensure_ascii=False), encoding="utf-8")
    traces = folder / "traces.jsonl"
    rows = read_jsonl_rows(traces)
    traces.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    done = {r["id"] for r in rows}
    errors_in_a_row, scored_any, questions_seconds = 0, bool(rows), 0.0
    with open(traces, "a", encoding="utf-8") as out, \
            progress(name, sum(q.id not in done for q in questions), "questions") as advance:
        todo = [(kb_name, q) for kb_name, group in by_index.items() for q in group if q.id not in done]
        # in flight together, questions of every KB need their KBs open at once; one at a time, one KB is
        batches = [todo] if concurrency > 1 else [[job for job in todo if job[0] == kb] for kb in dict.fromkeys(
            kb_name for kb_name, _ in todo)]
        for batch in batches:
            with ExitStack() as opened:
                runners: dict[str, _Runner] = {}
                for kb_name in dict.fromkeys(kb_name for kb_name, _ in batch):
                    kb = opened.enter_context(KnowledgeBase.open(kb_name, store, cached_queries=timing == "warm"))
                    runners[kb_name] = _Runner(kb, config, answer, timing)
                started = time.perf_counter()
                with in_order(_outcome(runners, concurrency == 1), batch, concurrency) as results:
                    for kb_name, question, row in results:
                        if "_error" in row:
                            error = row["_error"]
                            errors_in_a_row += 1
                            if errors_in_a_row >= ABORT_AFTER and not scored_any:
                                raise BabelragError(f"{name}: the first {ABORT_AFTER} questions all failed; the "
                                                    f"setup is broken, not the answers: {type(error).__name__}: "
                                                    f"{error}") from error
                            row = runners[kb_name].failed_row(question, error, row["_seconds"])
                        else:
                            errors_in_a_row, scored_any = 0, True
                        if question.id in seen:
                            row["seen"] = seen[question.id]
                        out.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
                        out.flush()
                        rows.append(row)
                        advance(1)
                questions_seconds += time.perf_counter() - started
    order = {q.id: i for i, q in enumerate(questions)}
    rows.sort(key=lambda r: order.get(r["id"], len(order)))
    metrics = run_metrics(rows, report_split)
    metrics["timing"] = {"mode": timing, "how": TIMING_NOTES[timing], "concurrency": concurrency,
                         "questions_seconds": questions_seconds,  # wall time of this call's questions, setup apart
                         **({"in_flight": CONCURRENCY_NOTE.format(n=concurrency)} if concurrency > 1 else {})}
    (folder / "metrics.json").write_text(json.dumps({"configs": {name: metrics}}, indent=2), encoding="utf-8")
    (folder / COMPLETE).write_text(time.strftime("%Y-%m-%dT%H:%M:%S"), encoding="utf-8")
    return RunResult(name, folder, rows, metrics)


def in_split(rows: Sequence[dict[str, Any]], split: str | None) -> list[dict[str, Any]]:
    """The headline rows: in ``split`` (when given), and never a question the configuration was tuned or
    fitted on (``row["seen"]``)."""
    return [r for r in rows if not r.get("seen") and (split is None or (r.get("tags") or {}).get("split") == split)]


def in_split_questions(questions: Sequence[GoldenQuestion], split: str | None) -> list[GoldenQuestion]:
    return [q for q in questions if split is None or q.tags.get("split") == split]


def run_metrics(rows: Sequence[dict[str, Any]], report_split: str | None = None) -> dict[str, Any]:
    """By cell and overall; with ``report_split`` the headline is that split, the rest shown apart; questions
    the configuration was tuned or fitted on are always shown apart (``seen``, with why)."""
    headline = in_split(rows, report_split)
    metrics = by_cell(headline)
    if report_split is not None:
        metrics["split"] = report_split
    kept = {id(r) for r in headline}
    others = [r for r in rows if id(r) not in kept]
    if others:
        metrics["excluded"] = {"n": len(others), **by_cell(others)}
    seen = Counter(r["seen"] for r in rows if r.get("seen"))
    if seen:
        metrics["seen"] = {"n": sum(seen.values()), "why": dict(seen)}
    if (loops := loop_summary(headline)) is not None:
        metrics["overall"]["loop"] = loops
    return metrics


def load_run(folder: Path) -> RunResult:
    """A completed run folder (single config) as written by ``run_config``."""
    if not (folder / COMPLETE).exists():
        raise ConfigError(f"{folder} is not a complete run (no {COMPLETE} marker)")
    frozen = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    metrics = json.loads((folder / "metrics.json").read_text(encoding="utf-8"))["configs"][frozen["name"]]
    return RunResult(frozen["name"], folder, read_jsonl_rows(folder / "traces.jsonl"), metrics)
