"""babelrag: multilingual retrieval-augmented generation, measured cell by cell.

The public Python API (``babelrag.api``): ``index``, ``open_kb`` and ``KB`` (search, ask, ask_stream,
index), the result types, and the preset names. Imported on first use, so the command line starts fast.
"""
from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__ = version("babelrag")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+source"

_PUBLIC = {"index": "babelrag.api", "open_kb": "babelrag.api", "KB": "babelrag.api", "PRESETS": "babelrag.config",
           "SearchConfig": "babelrag.config", "SearchResult": "babelrag.types", "Answer": "babelrag.types",
           "Hit": "babelrag.types", "Passage": "babelrag.types", "Question": "babelrag.types",
           "register_llm": "babelrag.models.registry", "BabelragError": "babelrag.errors"}
__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        return getattr(import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'babelrag' has no attribute '{name}'")
