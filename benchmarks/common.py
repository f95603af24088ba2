"""Shared benchmark helpers: the shared data location, a reusable bench store, percentiles, tables."""
from __future__ import annotations

import functools
import hashlib
import os
import sys
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
DATA = (ROOT / ".." / "shared" / "data").resolve()
XQUAD = DATA / "xquad-dev"
console = Console(width=170)


def bench_store() -> str:
    """Benchmarks keep their indexes apart from the user's, under $BABELRAG_HOME/bench."""
    from babelrag.paths import home

    return os.environ.get("BABELRAG_BENCH_STORE") or str(home() / "bench" / "store")


@functools.cache
def ensure_pooled_xquad(store: str) -> str:
    """Every language version of every xquad-dev paragraph in one KB (built once, then reused; rebuilt when an
    analyzer package changed since). Named after its sources' contents, as ``bench`` names its indexes, so that only
    a KB built from exactly these files is ever rebuilt, even where ``BABELRAG_BENCH_STORE`` names a store that
    holds a user's KBs too. Checked once a process (the sources are read whole to name it)."""
    from babelrag.experiments.runner import ensure_index
    from babelrag.store.base import open_store

    sources = sorted(XQUAD.glob("xquad.*.json"))
    if not sources:
        raise SystemExit(f"no xquad.*.json in {XQUAD}: the pooled benchmark KB has nothing to hold")
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.name.encode("utf-8") + b"\0" + source.read_bytes())
    kb = f"xquad-pooled-{digest.hexdigest()[:10]}"
    ensure_index(kb, [str(p) for p in sources], open_store(store))
    return kb


def pick_questions(golden: list, count: int) -> list:
    """Country-KB questions of the reported split not asked in English (so passages get translated),
    a fixed spread by hash."""
    pool = [q for q in golden if q.kb != "pooled" and q.lang != "en" and q.tags.get("split") == "test"] or golden
    return sorted(pool, key=lambda q: hashlib.sha1(q.id.encode()).hexdigest())[:count]


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def table(title: str, columns: list[str], rows: list[list[object]]) -> None:
    grid = Table(title=title)
    for column in columns:
        grid.add_column(column, justify="right" if column != columns[0] else "left")
    for row in rows:
        grid.add_row(*[f"{v:.3f}" if isinstance(v, float) else str(v) for v in row])
    console.print(grid)


def need_data() -> None:
    if not XQUAD.is_dir():
        sys.exit(f"shared data not found at {XQUAD}")
