"""Analysis outputs: JSON, Markdown tables, PNG heatmaps, and one self-contained HTML page with them."""
from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402


def matrix(flat: dict[str, float], rows: list[str], cols: list[str]) -> list[list[float | None]]:
    return [[flat.get(f"{r}|{c}") for c in cols] for r in rows]


def heatmap(values: list[list[float | None]], rows: list[str], cols: list[str], title: str, path: Path,
            fmt: str = "{:.1f}", cmap: str = "viridis") -> Path:
    figure, axes = plt.subplots(figsize=(1.0 + 0.7 * len(cols), 1.0 + 0.55 * len(rows)))
    grid = [[float("nan") if v is None else v for v in row] for row in values]
    image = axes.imshow(grid, cmap=cmap, aspect="auto")
    axes.set_xticks(range(len(cols)), cols)
    axes.set_yticks(range(len(rows)), rows)
    axes.set_xlabel("document / target language")
    axes.set_ylabel("query language")
    axes.set_title(title, fontsize=10)
    for i, row in enumerate(values):
        for j, value in enumerate(row):
            if value is not None:
                axes.text(j, i, fmt.format(value), ha="center", va="center", fontsize=7, color="white")
    figure.colorbar(image, ax=axes, fraction=0.046)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def _table(values: list[list[float | None]], rows: list[str], cols: list[str], fmt: str = "{:.1f}") -> list[str]:
    lines = ["| Lq \\ Ld | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for r, row in zip(rows, values):
        lines.append(f"| {r} | " + " | ".join("–" if v is None else fmt.format(v) for v in row) + " |")
    return lines


def preference_markdown(result: dict[str, Any]) -> str:
    rows, cols = result["query_languages"], result["document_languages"]
    lines = [f"# Language preference: {result['kb']}", "",
             f"{result['questions']} questions; MLRS over the top {result['options']['n']} with the "
             f"`{result['options']['rescorer']}` re-scorer, passages translated by `{result['options']['translator']}`. "
             f"Random re-scoring would give ≈ {result['random_reference']:.1f}.", "",
             "## MLRS (raw preference)", "", *_table(matrix(result["mlrs"], rows, cols), rows, cols)]
    if "delp" in result:
        lines += ["", "## DeLP (debiased)", "", *_table(matrix(result["delp"]["debiased"], rows, cols), rows, cols),
                  "", "Ridge coefficients (β): " + ", ".join(f"{k} {v:+.3f}" for k, v in result["delp"]["beta"].items()),
                  "", "## Correlation with each prior (Pearson r, raw prior; log prior in brackets)", "",
                  "| prior | MLRS | DeLP |", "|---|---|---|"]
        for name, r in result["correlations"].items():
            lines.append(f"| {name} | {r['before']:.3f} ({r['before_log']:.3f}) | {r['after']:.3f} ({r['after_log']:.3f}) |")
    if "sensitivity" in result:
        s = result["sensitivity"]
        lines += ["", f"## Gold-availability sensitivity ({s['languages'][0]} vs {s['languages'][1]})", ""]
        if s.get("note"):
            lines.append(s["note"])
        else:
            lines += [f"{s['gold_pages']} gold pages keep one version each, the {s['languages'][0]} one for a share "
                      f"{', '.join(f'{v:.2f}' for v in s['first_language_share'])} of them; MLRS, priors and DeLP "
                      f"measured again at each of the {s['ratios']} ratios. Gold availability the regression saw: "
                      + "; ".join(f"{lang} {' → '.join(f'{v:.2f}' for v in s['p_gold'][lang])}" for lang in s['languages'])
                      + ".", "",
                      "| | range | std |", "|---|---|---|",
                      f"| MLRS | {s['mlrs']['range']:.2f} | {s['mlrs']['std']:.2f} |",
                      f"| DeLP | {s['delp']['range']:.2f} | {s['delp']['std']:.2f} |",
                      "", f"Paired permutation test over {s['pairs']} pairs: p = {s['p_range']:.4f} (range), "
                          f"{s['p_std']:.4f} (std)."]
    lines += ["", "## Retrieved languages (share of the top-k per query language: the exposure prior)", "",
              *_table(matrix(result["priors"]["p_ret"], rows, cols), rows, cols, "{:.2f}"),
              "", "## Gold availability (share of questions whose gold page exists in Ld)", "",
              *_table(matrix(result["priors"]["p_gold"], rows, cols), rows, cols, "{:.2f}"),
              "", "Corpus share: " + ", ".join(f"{k} {v:.2f}" for k, v in result["priors"]["p_db"].items()),
              "", "Median passage length (chars): " + ", ".join(f"{k} {v:.0f}" for k, v in result["priors"]["length"].items()),
              "", "Cultural prior (locale classifier): " + ", ".join(f"{k} {v:.2f}" for k, v in result["priors"]["p_cult"].items()),
              *[f"- note: {n}" for n in result.get("notes", [])]]
    return "\n".join(lines) + "\n"


def write_preference(result: dict[str, Any], out: Path) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    rows, cols = result["query_languages"], result["document_languages"]
    files = {"json": out / "preference.json", "markdown": out / "preference.md"}
    files["json"].write_text(json.dumps(result, indent=2, ensure_ascii=False), encoding="utf-8")
    files["markdown"].write_text(preference_markdown(result), encoding="utf-8")
    images = {"mlrs": heatmap(matrix(result["mlrs"], rows, cols), rows, cols, "MLRS (raw)", out / "mlrs.png"),
              "retrieved": heatmap(matrix(result["priors"]["p_ret"], rows, cols), rows, cols,
                                   "retrieved language share", out / "retrieved.png", "{:.2f}", "Blues")}
    if "delp" in result:
        images["delp"] = heatmap(matrix(result["delp"]["debiased"], rows, cols), rows, cols, "DeLP (debiased)",
                                 out / "delp.png")
    files.update(images)
    files["html"] = out / "preference.html"
    files["html"].write_text(_page(f"Language preference: {result['kb']}", files["markdown"].read_text(), images),
                             encoding="utf-8")
    return files


def _page(title: str, markdown_text: str, images: dict[str, Path]) -> str:
    pictures = "".join(f'<figure><img alt="{html.escape(name)}" src="data:image/png;base64,'
                       f'{base64.b64encode(path.read_bytes()).decode()}"><figcaption>{html.escape(name)}</figcaption>'
                       f"</figure>" for name, path in images.items())
    return (f"<!doctype html><html lang=en><meta charset=utf-8><title>{html.escape(title)}</title>"
            "<style>body{font-family:system-ui,sans-serif;max-width:1100px;margin:24px auto;padding:0 16px}"
            "figure{display:inline-block;margin:8px}img{max-width:520px}pre{white-space:pre-wrap;background:#f6f8fa;"
            f"padding:12px}}</style><h1>{html.escape(title)}</h1>{pictures}<pre>{html.escape(markdown_text)}</pre></html>")
