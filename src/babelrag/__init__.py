"""babelrag: multilingual retrieval-augmented generation, measured cell by cell."""
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("babelrag")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+source"
