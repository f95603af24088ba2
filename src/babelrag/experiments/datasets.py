"""The benchmark datasets, one registry entry each: what layout it measures, what shipped data it needs,
and how it is built. ``babelrag bench`` builds every entry whose data is present (or those asked for);
a new layout is a new entry here and its builder, never a branch in the runner.

Layouts (docs/methods.md#cells cells under every page-language situation a deployment meets):
- ``parallel``: XQuAD country KBs (a page in the pivot, the local language or both) and the pooled KB
  holding every language version — a same-language copy of the gold page usually exists;
- ``unique-country``: country KBs whose pages are local-only or English-only, never both;
- ``scattered``: every page in exactly one language, questions in every language;
- ``mixed``: SweFAQ's Swedish FAQ beside XQuAD pages in other languages, one KB;
- ``skewed``: every page in one language, three in four of them English, questions in every language;
- ``monolingual``: SweFAQ alone (Swedish pages, Swedish questions);
- ``skewed-local``: as ``skewed`` but mostly in a non-English language. *Held out*: built only when named, so
  neither ``bench``'s default run nor the shipped relevance model's fit (``benchmarks/default_relevance.py``) ever
  sees it — a layout kept aside to check that the default generalises.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from babelrag.experiments import scattered, swefaq, xquad_cells
from babelrag.experiments.squad import SquadCorpus, load_squad_folder
from babelrag.experiments.xquad_cells import SplitBy
from babelrag.registry import DATASETS

Source = Literal["xquad", "swefaq"]


@dataclass
class Sources:
    """The shipped data found under a folder, read once however many datasets use it."""

    squad: Path | None
    faq: Path | None
    quick: bool = False
    seed: int = 13
    split_by: SplitBy = "article"

    @classmethod
    def locate(cls, data: Path, **options: Any) -> Sources:
        """An XQuAD-format folder (``data`` itself or ``data/xquad-dev``) and a SweFAQ file, when present."""
        squad = data if any(data.glob("*.*.json")) else data / "xquad-dev"
        faq = data / "swefaq-dev" / "swefaq_dev.jsonl"
        return cls(squad if squad.is_dir() and any(squad.glob("*.*.json")) else None,
                   faq if faq.is_file() else None, **options)

    @cached_property
    def corpus(self) -> SquadCorpus:
        assert self.squad is not None
        return load_squad_folder(self.squad)

    def has(self, needs: tuple[Source, ...]) -> bool:
        return all((self.squad if need == "xquad" else self.faq) is not None for need in needs)


Builder = Callable[[Sources, Path], dict[str, Any]]


@dataclass(frozen=True)
class Dataset:
    name: str
    layout: str
    needs: tuple[Source, ...]
    build: Builder = field(repr=False)
    about: str = ""
    held_out: bool = False  # built only when named: no default run and no fit ever sees it


def _cells(layout: xquad_cells.Layout) -> Builder:
    def build(sources: Sources, out: Path) -> dict[str, Any]:
        recipe = xquad_cells.default_recipe(sources.corpus, seed=sources.seed, quick=sources.quick, layout=layout,
                                            split_by=sources.split_by)
        return xquad_cells.build(recipe, out)
    return build


def _swefaq(sources: Sources, out: Path) -> dict[str, Any]:
    assert sources.faq is not None
    return swefaq.build(sources.faq, out)


def _scattered(sources: Sources, out: Path) -> dict[str, Any]:
    return scattered.build_scattered(sources.corpus, out, sources.quick, sources.seed, sources.split_by)


def _skewed(sources: Sources, out: Path) -> dict[str, Any]:
    return scattered.build_skewed(sources.corpus, out, sources.quick, sources.seed, sources.split_by)


def _skewed_local(sources: Sources, out: Path) -> dict[str, Any]:
    return scattered.build_skewed_local(sources.corpus, out, sources.quick, sources.seed, sources.split_by)


def _mixed(sources: Sources, out: Path) -> dict[str, Any]:
    assert sources.faq is not None
    return scattered.build_mixed(sources.corpus, sources.faq, out, sources.quick, sources.seed, sources.split_by)


def _register(dataset: Dataset) -> None:
    """``DATASETS.make(name)`` gives the dataset's description: its layout, the data it needs, its builder."""
    DATASETS.register(dataset.name, about=dataset.about)(lambda: dataset)


for _dataset in (
    Dataset("xquad-cells", "parallel", ("xquad",), _cells("parallel"),
            "country KBs (pivot, local or both per page) and the pooled KB of every language version"),
    Dataset("swefaq", "monolingual", ("swefaq",), _swefaq, "Swedish FAQ answers, Swedish questions"),
    Dataset("xquad-unique", "unique-country", ("xquad",), _cells("unique-country"),
            "country KBs whose pages are local-only or English-only, never both"),
    Dataset("xquad-scattered", "scattered", ("xquad",), _scattered,
            "every page in one language, questions in every language"),
    Dataset("mixed", "mixed", ("xquad", "swefaq"), _mixed, "SweFAQ beside XQuAD pages in other languages"),
    Dataset("xquad-skewed", "skewed", ("xquad",), _skewed,
            "every page in one language, three in four of them English; questions in every language"),
    Dataset("xquad-skewed-local", "skewed-local", ("xquad",), _skewed_local,
            "held out (run only when named): as skewed, three in four pages in one non-English language",
            held_out=True),
):
    _register(_dataset)
ALL: tuple[Dataset, ...] = tuple(entry.make() for entry in DATASETS.entries())
LAYOUTS = tuple(dict.fromkeys(d.layout for d in ALL))


def chosen(names: list[str] | None) -> list[Dataset]:
    """The datasets named (by dataset or layout name), or all of them but the held-out ones."""
    if not names:
        return [d for d in ALL if not d.held_out]
    for name in names:
        if name not in LAYOUTS:
            DATASETS.entry(name, also=tuple(layout for layout in LAYOUTS if layout not in DATASETS))
    return [d for d in ALL if d.name in names or d.layout in names]
