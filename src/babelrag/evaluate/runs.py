"""Evaluation runs: one configuration over a golden set, into a run folder.

A run folder holds ``config.json`` (frozen), ``traces.jsonl`` (one line per question, written
as it goes), ``metrics.json`` and, only at the very end, ``COMPLETE``. Re-running the same
configuration resumes an interrupted folder and reuses a complete one; another configuration
in the same folder is refused rather than mixed in.
"""
from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from babelrag import __version__
from babelrag.config import SearchConfig
from babelrag.errors import ConfigError
from babelrag.evaluate.answers import answer_language_correct, char3gram_recall, flexible_exact_match
from babelrag.evaluate.cells import by_cell
from babelrag.evaluate.golden import GoldenQuestion
from babelrag.evaluate.loops import loop_summary
from babelrag.evaluate.metrics import retrieval_scores
from babelrag.generate.answerer import Answerer
from babelrag.generate.generator import strip_citations
from babelrag.kb import KnowledgeBase
from babelrag.paths import cache_dir
from babelrag.progress import progress
from babelrag.retrieve.cache import RetrievalCache
from babelrag.retrieve.pipeline import Searcher
from babelrag.types import Answer, SearchResult, Trace

COMPLETE = "COMPLETE"
FROZEN = ("config", "golden", "index", "answer")  # what must match for a folder to be resumed


@dataclass(frozen=True)
class RunResult:
    name: str
    folder: Path
    rows: list[dict[str, Any]]
    metrics: dict[str, Any]


def _question_row(question: GoldenQuestion, result: SearchResult | None, trace: Trace,
                  seconds: float) -> dict[str, Any]:
    waited = sum(c.seconds for c in trace.llm_calls if not c.cached)  # model time this run really spent
    row = {"id": question.id, "kb": question.kb, "lang": question.lang, "country": question.country,
           "tags": dict(question.tags), "gold_pages": list(question.gold_pages),
           "latency_ms": seconds * 1000, "retrieval_ms": max(0.0, seconds - waited) * 1000, **trace.llm_totals()}
    if result is not None:
        pages = result.evidence.doc_ids()
        row.update(ranked_pages=pages, evidence=[h.to_dict() for h in result.evidence.hits], docs_passed=result.passed,
                   **retrieval_scores(pages, question.gold_pages))
    else:
        row.update(ranked_pages=[], evidence=[], docs_passed=0)
    return row


def _answer_fields(question: GoldenQuestion, answer: Answer, languages: Sequence[str]) -> dict[str, Any]:
    """Answer metrics on the generated text only (never the prompt: SPEC §8.6), against the gold
    answers in the question's language."""
    scored = strip_citations(answer.text)
    references = question.answers_in(question.lang)
    lang_ok = answer_language_correct(scored, question.lang, languages)
    return {"answer": answer.text, "answer_scored": scored, "cited_how": answer.cited_how,
            "citations": [c.passage.id for c in answer.citations],
            "answer_char3": char3gram_recall(scored, references) if references else None,
            "answer_em": float(flexible_exact_match(scored, references)) if references else None,
            "answer_lang_ok": lang_ok, "answer_lang_unclassified": float(lang_ok is None)}


def golden_fingerprint(questions: Sequence[GoldenQuestion]) -> str:
    digest = hashlib.sha256()
    for q in questions:
        digest.update(q.model_dump_json().encode())
    return digest.hexdigest()[:16]


def _read_rows(path: Path) -> list[dict[str, Any]]:
    rows = []
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:  # a line cut by an interruption: that question runs again
                break
    return rows


def _with_new_defaults(before: dict[str, Any], now: dict[str, Any]) -> dict[str, Any]:
    """A frozen config written before a field existed: that field at its default is the behaviour the
    run had, so it may resume; any other value is another configuration."""
    defaults = SearchConfig().model_dump(mode="json")
    return {**{k: defaults[k] for k in now if k not in before and k in defaults}, **before}


def run_config(name: str, config: SearchConfig, questions: Sequence[GoldenQuestion], folder: Path,
               store: str | None = None, index: str | None = None, cache: bool = True,
               answer: bool = False) -> RunResult:
    """Evaluate ``config`` on ``questions`` (with ``answer``: generate and score answers too).
    ``index`` overrides each question's own index/kb."""
    folder.mkdir(parents=True, exist_ok=True)
    frozen = {"name": name, "config": config.model_dump(mode="json"), "golden": golden_fingerprint(questions),
              "questions": len(questions), "store": store, "index": index, "answer": answer,
              "babelrag_version": __version__}
    config_file = folder / "config.json"
    if config_file.exists():
        before = json.loads(config_file.read_text(encoding="utf-8"))
        before["config"] = _with_new_defaults(before.get("config") or {}, frozen["config"])
        if {k: before.get(k) for k in FROZEN} != {k: frozen[k] for k in FROZEN}:
            raise ConfigError(f"run folder {folder} holds another configuration or golden set; use a new --out")
        if (folder / COMPLETE).exists():
            rows = _read_rows(folder / "traces.jsonl")
            return RunResult(name, folder, rows, json.loads((folder / "metrics.json").read_text())["configs"][name])
    else:
        config_file.write_text(json.dumps(frozen, indent=2, ensure_ascii=False), encoding="utf-8")
    traces = folder / "traces.jsonl"
    rows = _read_rows(traces)
    traces.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    done = {r["id"] for r in rows}
    todo = [q for q in questions if q.id not in done]
    retrieval_cache = RetrievalCache(cache_dir() / "retrieval.sqlite") if cache else None
    by_index: dict[str, list[GoldenQuestion]] = {}
    for q in todo:
        by_index.setdefault(index or q.index or q.kb, []).append(q)
    with open(traces, "a", encoding="utf-8") as out, progress(f"{name}", len(todo)) as advance:
        for kb_name, group in by_index.items():
            with KnowledgeBase.open(kb_name, store) as kb:
                runner = Answerer(kb, config, retrieval_cache) if answer else Searcher(kb, config, retrieval_cache)
                languages = sorted(set(kb.manifest["languages"].get("all", {})) | {"en"})
                for question in group:
                    start = time.perf_counter()
                    if isinstance(runner, Answerer):
                        reply = runner.ask(question.as_question())
                        row = _question_row(question, reply.search, reply.trace, time.perf_counter() - start)
                        row.update(_answer_fields(question, reply, languages))
                        trace = reply.trace
                    else:
                        result = runner.search(question.as_question())
                        row = _question_row(question, result, result.trace, time.perf_counter() - start)
                        trace = result.trace
                    row["trace"] = trace.to_dict()
                    out.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
                    out.flush()
                    rows.append(row)
                    advance(1)
    order = {q.id: i for i, q in enumerate(questions)}
    rows.sort(key=lambda r: order.get(r["id"], len(order)))
    metrics = by_cell(rows)
    if (loops := loop_summary(rows)) is not None:
        metrics["overall"]["coral"] = loops
    (folder / "metrics.json").write_text(json.dumps({"configs": {name: metrics}}, indent=2), encoding="utf-8")
    (folder / COMPLETE).write_text(time.strftime("%Y-%m-%dT%H:%M:%S"), encoding="utf-8")
    return RunResult(name, folder, rows, metrics)


def load_run(folder: Path) -> RunResult:
    """A completed run folder (single config) as written by ``run_config``."""
    if not (folder / COMPLETE).exists():
        raise ConfigError(f"{folder} is not a complete run (no {COMPLETE} marker)")
    frozen = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    metrics = json.loads((folder / "metrics.json").read_text(encoding="utf-8"))["configs"][frozen["name"]]
    return RunResult(frozen["name"], folder, _read_rows(folder / "traces.jsonl"), metrics)
