"""Benchmark (service): /search over loopback at concurrency 1, 4 and 16, against in-process search.

The same real questions (XQuAD-dev, pooled KB) go to the in-process `Searcher` first — the
baseline measured in this run — then to `POST /search` on a uvicorn server on 127.0.0.1 through
an HTTP client pool. Query vectors are remembered by the KB in both cases after the first pass
(a warm-up pass embeds every question once), so the ratio isolates what the HTTP layer costs.
Run: python benchmarks/service.py [--requests N]
"""
from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from common import XQUAD, bench_store, ensure_pooled_xquad, need_data, percentile, table

from babelrag.experiments.squad import load_squad_folder
from babelrag.config import preset_config
from babelrag.retrieve.pipeline import Searcher
from babelrag.server.app import create_app
from babelrag.server.service import Service
from babelrag.types import Question

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_server import ThreadedServer  # noqa: E402  (the same loopback server the soak test uses)


def measured(service: Service, kb_name: str, questions: list[str], requests: int) -> list[list]:
    """In-process search, then /search at concurrency 1, 4 and 16: one row each."""
    kb = service.kb(kb_name)
    searcher = Searcher(kb, preset_config("default"))
    for text in questions:  # warm-up: every question embedded once, remembered by the KB
        searcher.search(Question(text))
    rows = []
    in_process = []
    start = time.perf_counter()
    for i in range(requests):
        tick = time.perf_counter()
        searcher.search(Question(questions[i % len(questions)]))
        in_process.append(time.perf_counter() - tick)
    base_rate = requests / (time.perf_counter() - start)
    rows.append(["in-process (1 thread)", base_rate, percentile(in_process, 50) * 1000,
                 percentile(in_process, 95) * 1000, "1.00×"])
    with ThreadedServer(create_app(service)) as base:
        for concurrency in (1, 4, 16):
            latencies: list[float] = []
            lock = threading.Lock()
            with httpx.Client(base_url=base, timeout=60, limits=httpx.Limits(max_connections=concurrency)) as http:
                def call(i: int) -> int:
                    tick = time.perf_counter()
                    status = http.post("/search", json={"kb": kb_name, "question": questions[i % len(questions)]}
                                       ).status_code
                    with lock:
                        latencies.append(time.perf_counter() - tick)
                    return status
                start = time.perf_counter()
                with ThreadPoolExecutor(concurrency) as pool:
                    statuses = list(pool.map(call, range(requests)))
                rate = requests / (time.perf_counter() - start)
            if errors := Counter(s for s in statuses if s != 200):
                raise SystemExit(f"HTTP, concurrency {concurrency}: {sum(errors.values())} of {requests} requests "
                                 f"failed (status: count {dict(errors)}); the figures would measure failures")
            rows.append([f"HTTP, concurrency {concurrency}", rate,
                         percentile(latencies, 50) * 1000, percentile(latencies, 95) * 1000, f"{rate / base_rate:.2f}×"])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=1000)
    args = parser.parse_args()
    need_data()
    store = bench_store()
    kb_name = ensure_pooled_xquad(store)
    questions = [q.text for q in random.Random(2).sample(load_squad_folder(XQUAD).questions, 200)]
    # no rate limit: every request comes from one loopback client, and the limit (120 a minute by default) would
    # answer most of them 429 — a benchmark of refusals
    service = Service(store, Path("runs"), frozenset(), rate_limit=0)
    try:
        rows = measured(service, kb_name, questions, args.requests)
    finally:
        service.close()
    table(f"/search on pooled xquad-dev ({args.requests} requests per row, warm query vectors)",
          ["", "requests/s", "p50 ms", "p95 ms", "throughput vs in-process"], rows)


if __name__ == "__main__":
    main()
