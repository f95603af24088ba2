"""The service's web page in headless Chromium: ask a question, watch the answer stream in, see the
citations and one panel per search path (with the passages that survived marked)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from babelrag.ingest.pipeline import index_sources
from babelrag.server.app import create_app
from babelrag.server.service import Service

from conftest import need_llm
from test_server import DOCS, ThreadedServer

playwright = pytest.importorskip("playwright.sync_api")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium not installed")]
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"


def test_page_answers_with_citations_and_path_panels(tmp_path: Path) -> None:
    llm = need_llm()
    (tmp_path / "docs.jsonl").write_text("\n".join(json.dumps(d, ensure_ascii=False) for d in DOCS), encoding="utf-8")
    index_sources("pharma", [str(tmp_path / "docs.jsonl")], str(tmp_path / "store"))
    service = Service(str(tmp_path / "store"), tmp_path, frozenset(), llm,
                      defaults={"generate_k": 2, "answer_tokens": 24, "rerank": "dense"})
    with ThreadedServer(create_app(service)) as base, playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                                          "--disable-component-update", "--disable-sync", "--no-first-run"])
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(base)
        page.wait_for_function("document.querySelectorAll('#kb option').length > 0")
        page.select_option("#kb", "pharma")
        page.select_option("#preset", "multirag")
        page.fill("#question", "Var köper jag receptfria läkemedel?")
        page.click("#ask-button")
        page.wait_for_selector(".path", timeout=120_000)
        assert page.locator("#answer").inner_text().strip()
        assert page.locator(".path").count() == 1 and page.locator(".path tr.kept").count() >= 1
        assert page.locator(".citation").count() >= 1 or "No passage cited" in page.locator("#citations").inner_text()
        assert "LLM calls" in page.locator("#status").inner_text()
        page.click("#tab-runs")
        page.wait_for_selector("#runs li")
        ARTIFACTS.mkdir(exist_ok=True)
        page.click("#tab-ask")
        page.screenshot(path=str(ARTIFACTS / "service.png"), full_page=True)
        browser.close()
    service.close()
    assert not errors


def test_page_asks_for_the_read_key_and_sends_the_language(tmp_path: Path, scripted) -> None:  # noqa: ANN001
    """Under --read-key-file the page's own requests got 401 and it had nowhere to put a key; its form had no
    language field."""
    asked: list[str] = []

    def answer(messages: list[dict[str, str]]) -> str:
        asked.append(messages[0]["content"])
        return "Apoteket [1]."

    (tmp_path / "docs.jsonl").write_text("\n".join(json.dumps(d, ensure_ascii=False) for d in DOCS), encoding="utf-8")
    index_sources("pharma", [str(tmp_path / "docs.jsonl")], str(tmp_path / "store"))
    service = Service(str(tmp_path / "store"), tmp_path, frozenset(), scripted(answer),
                      read_keys=frozenset({"reader-key-0123456789"}), defaults={"rerank": "dense"})
    with ThreadedServer(create_app(service)) as base, playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(base)
        page.wait_for_selector("#key-form:not([hidden])")
        assert "needs a key" in page.locator("#status").inner_text()
        page.fill("#api-key", "wrong")
        page.click("#key-button")
        page.wait_for_function("document.querySelector('#status').innerText.includes('refused')")
        page.fill("#api-key", "reader-key-0123456789")
        page.click("#key-button")
        page.wait_for_function("document.querySelectorAll('#kb option').length > 0")
        assert page.locator("#key-form").is_hidden()
        page.fill("#question", "Var köper jag receptfria läkemedel?")
        page.fill("#lang", "EN")  # a Swedish question, answered in the language the form names
        page.click("#ask-button")
        page.wait_for_function("document.querySelector('#status').innerText.includes('question language en')")
        assert page.locator("#answer").inner_text().startswith("Apoteket")
        browser.close()
    service.close()
    assert not errors and asked and "in English" in asked[0]
