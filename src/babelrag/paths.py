"""Where babelrag keeps its state: ``$BABELRAG_HOME`` (default ``~/.babelrag``)."""
from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    return Path(os.environ.get("BABELRAG_HOME") or Path.home() / ".babelrag")


def default_store() -> str:
    return os.environ.get("BABELRAG_STORE") or str(home() / "store")


def cache_dir() -> Path:
    return home() / "cache"


def threads() -> int | None:
    """CPU threads for the in-process models (``BABELRAG_THREADS``; default: the engines' own choice).
    Two jobs on one machine each set it, rather than both spinning on every core."""
    value = os.environ.get("BABELRAG_THREADS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None
