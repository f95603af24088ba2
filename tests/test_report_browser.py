"""The HTML cell report in headless Chromium (Debian's binary, driven by Playwright): it renders, the
controls change the matrix, the tooltip shows n and CI, and the console stays clean."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from babelrag.evaluate.cells import by_cell
from babelrag.evaluate.report import html

playwright = pytest.importorskip("playwright.sync_api")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium not installed (.ci/run installs it)")]
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"


def rows(recall: float, docs: int) -> list[dict]:
    out = []
    for kb, lang, n in (("SE-mixed", "sv", 40), ("SE-mixed", "en", 12), ("PL-bilingual", "pl", 35)):
        for i in range(n):
            hit = 1.0 if i < n * recall else 0.0
            out.append({"id": f"{kb}:{lang}:{i}", "kb": kb, "lang": lang, "recall@10": hit, "mrr": hit / 2,
                        "docs_passed": docs, "latency_ms": 5.0})
    return out


def summary() -> dict:
    from babelrag.evaluate.report import comparisons
    from babelrag.evaluate.runs import RunResult

    results = [RunResult(name, Path(name), r, by_cell(r)) for name, r in
               (("keyword", rows(0.5, 10)), ("hybrid", rows(0.9, 10)), ("+threshold", rows(0.85, 6)))]
    return {"configs": {r.name: r.metrics for r in results}, "comparisons": comparisons(results)}


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory):
    report = tmp_path_factory.mktemp("report") / "report.html"
    report.write_text(html(summary()), encoding="utf-8")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                                          "--disable-component-update", "--disable-sync", "--no-first-run"])
        page = browser.new_page()
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(report.as_uri())
        page.errors = errors
        yield page
        browser.close()


def cell_texts(page) -> list[str]:
    return page.locator("#matrix td").all_inner_texts()


def test_report_renders_the_matrix(page) -> None:
    assert page.locator("#matrix tbody tr").count() == 2  # KBs
    assert page.locator("#matrix thead th").count() == 4  # corner + en, pl, sv
    assert "not asked" in cell_texts(page)  # PL-bilingual × sv
    assert page.locator("#config-name").inner_text().endswith("keyword")
    assert page.locator("#matrix td.small").count() == 1  # SE-mixed × en has 12 questions
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
    assert not page.errors


def test_controls_change_the_matrix(page) -> None:
    before = cell_texts(page)
    page.click("#next")
    assert page.locator("#config-name").inner_text().endswith("hybrid")
    after = cell_texts(page)
    assert after != before and any("Δ" in text for text in after)
    page.click("button[data-metric='docs_passed']")
    assert page.locator("#matrix").get_attribute("data-metric") == "docs_passed"
    assert "10.0" in " ".join(cell_texts(page))
    page.click("#next")
    assert "6.0" in " ".join(cell_texts(page))
    page.click("button[data-metric='mrr']")
    page.click("#prev")
    assert page.locator("#config-name").inner_text().endswith("hybrid")
    assert page.locator("#matrix").get_attribute("data-metric") == "mrr"
    assert not page.errors


def test_play_steps_through_configurations(page) -> None:
    page.click("#prev")
    page.click("#prev")
    page.click("#play")
    page.wait_for_function("document.getElementById('matrix').dataset.config === '+threshold'", timeout=10_000)
    assert page.locator("#play").inner_text().strip().endswith("play")  # stopped at the end
    assert not page.errors


def test_hover_shows_n_and_interval(page) -> None:
    page.hover("#matrix td[data-key='SE-mixed|sv']")
    tip = page.locator("#tooltip")
    assert tip.is_visible()
    assert "n = 40" in tip.inner_text() and "95% CI" in tip.inner_text()
    assert not page.errors
