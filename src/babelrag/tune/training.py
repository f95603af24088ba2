"""Training candidates for the relevance model: every candidate each path retrieved for a golden
question, described by its features and labelled by whether its page is gold.

Paths per question: the question as written, and — standing in for translated paths without
spending a model call — the same question's versions in other languages from the golden set
itself (XQuAD's professional translations share a ``qid`` tag), searched as translated paths; and
over the KB's pivot copies when it has them (``relevance.learn.fit`` leaves them out of the rows the shared
weights are fitted on, and gives them weights of their own).

Each question belongs to a *group* (``evaluate/clusters.py``: its qid, or its article): folds and
halves are drawn by group, so a held-out question's translations — which the training side would
otherwise search as its translated paths — and, by article, its page never sit on the training side.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from babelrag.config import DeltaConfig, SearchConfig
from babelrag.evaluate.clusters import Unit, cluster_key
from babelrag.evaluate.golden import GoldenQuestion
from babelrag.kb import KnowledgeBase
from babelrag.progress import progress
from babelrag.relevance.features import FEATURES, PIVOT_COPY, feature_matrix
from babelrag.relevance.learned import query_terms
from babelrag.retrieve.search import retrieve
from babelrag.strategies.delta import fuse_query
from babelrag.strategies.scope import path_filter
from babelrag.strategies.tuned import ANY
from babelrag.types import SearchRequest, Trace


@dataclass(frozen=True)
class Candidates:
    rows: np.ndarray  # one row per (question, path, candidate), columns ``FEATURES``
    labels: np.ndarray  # 1 when the candidate's page is gold
    question: np.ndarray  # the row's question, an index into ``asked``
    path: np.ndarray  # the row's path within its question (0 = as written)
    path_lang: np.ndarray  # the language of the row's path
    asked: list[GoldenQuestion]  # the questions, in index order
    groups: list[str]  # per question: what folds keep together (its qid, or its article)

    @property
    def ids(self) -> list[str]:
        return [q.id for q in self.asked]

    @property
    def cells(self) -> list[tuple[str, str]]:
        """(country or ANY, lang) per question: the profile's cells."""
        return [(q.country or ANY, q.lang) for q in self.asked]

    @property
    def texts(self) -> list[str]:
        """Each question's text as asked (fold models are found by it)."""
        return [q.question for q in self.asked]

    @property
    def qids(self) -> list[str]:
        """The question each is a version of: what statistics count once."""
        return [cluster_key(q.model_dump()) for q in self.asked]

    def row_groups(self) -> np.ndarray:
        """Each row's group."""
        return np.asarray(self.groups, dtype=object)[self.question] if len(self.question) else np.zeros(0, dtype=object)

    def group_texts(self) -> dict[str, list[str]]:
        """Each group's question texts (every language version)."""
        out: dict[str, list[str]] = {}
        for group, text in zip(self.groups, self.texts):
            out.setdefault(group, []).append(text)
        return out

    @classmethod
    def concat(cls, parts: Sequence[Candidates]) -> Candidates:
        """Several indexes' candidates as one set (question indexes renumbered)."""
        offsets = np.cumsum([0, *(len(p.asked) for p in parts)])
        return cls(np.vstack([p.rows for p in parts]), np.concatenate([p.labels for p in parts]),
                   np.concatenate([p.question + offset for p, offset in zip(parts, offsets)]),
                   np.concatenate([p.path for p in parts]), np.concatenate([p.path_lang for p in parts]),
                   [q for p in parts for q in p.asked], [g for p in parts for g in p.groups])

    def path_keys(self) -> np.ndarray:
        """Each row's path as one number (question and path within it): what the weights rank within."""
        width = int(self.path.max()) + 1 if len(self.path) else 1
        return self.question.astype(np.int64) * width + self.path

    def select(self, keep: Sequence[str]) -> Candidates:
        """Only these questions' rows (the dev split, a fold)."""
        wanted = set(keep)
        chosen = np.array([q.id in wanted for q in self.asked], dtype=bool)
        mask = chosen[self.question] if len(self.question) else np.zeros(0, dtype=bool)
        return replace(self, rows=self.rows[mask], labels=self.labels[mask], question=self.question[mask],
                       path=self.path[mask], path_lang=self.path_lang[mask])

    def best_paths(self, max_paths: int, shares: Mapping[str, float] | None = None) -> dict[tuple[str, str], list[str]]:
        """Per cell, the path languages in order of how well their paths found the gold (MRR@10 of each
        path's own candidates in its retrieval order, which the rows keep) — what KB-language targets to
        search for that question language; ties go to the language holding more of the KB (``shares``)."""
        found: dict[tuple[tuple[str, str], str], list[float]] = {}
        generated = ((self.rows[:, FEATURES.index("generated")] > 0) | (self.rows[:, FEATURES.index(PIVOT_COPY)] > 0)
                     if len(self.rows) else np.zeros(0, dtype=bool))  # neither is a path in one KB language
        cells = self.cells
        kept = np.flatnonzero(~generated)
        # every path's rows together, in the order retrieval gave them: one pass, however many questions
        by_path = kept[np.lexsort((kept, self.path[kept], self.question[kept]))]
        question, path = self.question[by_path], self.path[by_path]
        starts = np.flatnonzero(np.r_[True, (np.diff(question) != 0) | (np.diff(path) != 0)]) if len(by_path) else []
        for start, end in zip(starts, [*starts[1:], len(by_path)]):
            rows = by_path[start:min(end, start + 10)]
            hits = np.flatnonzero(self.labels[rows] > 0)
            key = (cells[question[start]], str(self.path_lang[rows[0]]))
            found.setdefault(key, []).append(1.0 / (hits[0] + 1) if len(hits) else 0.0)
        by_cell: dict[tuple[str, str], list[tuple[float, str]]] = {}
        for (cell, lang), values in found.items():
            by_cell.setdefault(cell, []).append((float(np.mean(values)), lang))
        share = shares or {}
        return {cell: [lang for _, lang in sorted(scored, key=lambda s: (-round(s[0], 6), -share.get(s[1], 0.0),
                                                                         s[1]))][:max_paths]
                for cell, scored in by_cell.items()}


def _twins(golden: Sequence[GoldenQuestion]) -> dict[tuple[str, str], list[GoldenQuestion]]:
    by_qid: dict[tuple[str, str], list[GoldenQuestion]] = {}
    for q in golden:
        if q.tags.get("qid"):
            by_qid.setdefault((q.kb, q.tags["qid"]), []).append(q)
    return by_qid


def requests_for(question: GoldenQuestion, kb: KnowledgeBase, config: SearchConfig,
                 twins: Sequence[GoldenQuestion], generated: bool = False, copies: bool = True) -> list[SearchRequest]:
    """The question as written, then its other-language versions as translated paths (same filter), and with
    ``generated`` a model's text in the shape DELTA writes it — the English version twice beside the question
    (``fuse_query`` without a cue or anchors, exactly DELTA's fallback) — as a generated path; with ``copies``
    the question over the KB's pivot copies, when it has them."""
    asked = question.as_question()
    flt = path_filter(asked, config, kb)
    requests = [SearchRequest(question.question, kb.name, question.lang, flt, "as_written")]
    requests += [SearchRequest(t.question, kb.name, t.lang, flt, f"kb:{t.lang}", origin="translated")
                 for t in twins if t.lang != question.lang]
    english = next((t for t in twins if t.lang == "en"), None)
    if generated and english is not None and question.lang != "en":
        fused = fuse_query(english.question, question.question, question.lang, None, None, question.lang,
                           DeltaConfig())
        requests.append(SearchRequest(fused.text, kb.name, question.lang, flt, "delta", segments=fused.segments,
                                      origin="generated"))
    if copies and kb.pivot_copies() is not None:
        requests.append(SearchRequest(question.question, kb.name, question.lang, flt, "pivot_copies",
                                      index="pivot_copies"))
    return requests


def collect(kb: KnowledgeBase, questions: Sequence[GoldenQuestion], config: SearchConfig,
            golden: Sequence[GoldenQuestion] = (), translated_paths: bool = True,
            unit: Unit = "question", generated: bool = False, copies: bool = True) -> Candidates:
    """``golden``: where to look for each question's other-language versions (default: ``questions``);
    ``unit``: what a group is (a question and its translations, or an article); ``generated``: a DELTA-shaped
    generated path too; ``copies``: the copy path too, on a KB that has pivot copies."""
    twins = _twins(golden or questions) if translated_paths else {}
    rows, labels, owner, paths, langs = [], [], [], [], []
    with progress("relevance candidates", len(questions)) as advance:
        for index, question in enumerate(questions):
            gold = set(question.gold_pages)
            versions = twins.get((question.kb, question.tags.get("qid", "")), [])
            for number, request in enumerate(requests_for(question, kb, config, versions, generated, copies)):
                ranking = retrieve(kb, request, config, Trace(), rescoring=True, centring=True)  # as searched
                if not ranking.hits:
                    continue
                matrix = feature_matrix(ranking.hits, request, query_terms(request.text, request))
                rows.append(matrix)
                labels.append(np.array([float(h.passage.doc_id in gold) for h in ranking.hits]))
                owner.append(np.full(len(ranking.hits), index))
                paths.append(np.full(len(ranking.hits), number))
                langs.append(np.full(len(ranking.hits), request.lang or "", dtype=object))
            advance(1)
    empty = np.zeros((0, len(FEATURES)))
    return Candidates(np.vstack(rows) if rows else empty, np.concatenate(labels) if labels else np.zeros(0),
                      np.concatenate(owner) if owner else np.zeros(0, dtype=int),
                      np.concatenate(paths) if paths else np.zeros(0, dtype=int),
                      np.concatenate(langs) if langs else np.zeros(0, dtype=object),
                      list(questions), [cluster_key(q.model_dump(), unit) for q in questions])
