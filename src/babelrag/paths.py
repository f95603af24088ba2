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
