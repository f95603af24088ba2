"""The report's layout view: every configuration on every layout (parallel, unique-country, scattered,
mixed, monolingual), split by where the gold page is — in the question's language, or only in another.

The *language gap* is MRR with the gold page in the question's language minus MRR with it elsewhere:
a question should find its page almost as well whatever language the page is written in. A table in
the Markdown report, and a picture (``layouts.png``) because the gaps are seen faster than read.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

GOLD_PARTS = (("gold_in_lang", "gold in the question's language"), ("gold_elsewhere", "gold in another language"))


def language_gap(layout: dict[str, Any], metric: str = "mrr") -> float | None:
    """The layout's gap as aggregated (``cells.language_gap_summary``), else from its two sides' means."""
    if (gap := (layout.get("gap") or {}).get(metric)) is not None:
        return gap
    inside, elsewhere = layout.get("gold_in_lang", {}).get(metric), layout.get("gold_elsewhere", {}).get(metric)
    return None if inside is None or elsewhere is None else inside - elsewhere


def _gap_cell(layout: dict[str, Any]) -> str:
    gap = language_gap(layout)
    if gap is None:
        return "–"
    ci = (layout.get("gap") or {}).get("mrr_ci")
    if not ci:  # a run aggregated before gaps had intervals
        return f"{gap:+.3f}"
    if not all(map(math.isfinite, ci)):
        return f"{gap:+.3f} (too few questions on a side for an interval)"
    return f"{gap:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}]"


def _n(part: dict[str, Any] | None) -> str:
    return "–" if not part else f"{part['questions']} q / {part['n']} rows"


def _value(part: dict[str, Any] | None, metric: str) -> str:
    if not part or part.get(metric) is None:
        return "–"
    ci = part.get(f"{metric}_ci")
    return f"{part[metric]:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def layout_lines(configs: dict[str, Any]) -> list[str]:
    """One table per layout: each configuration's MRR overall and by where the gold page is, with n as
    questions and rows and intervals that resample questions."""
    layouts = sorted({name for cfg in configs.values() for name in cfg.get("layouts") or {}})
    if not layouts:
        return []
    lines = ["", "## By layout: where the gold page is", "",
             "MRR with a 95 % interval resampling questions (a question and its translations are one); n as "
             "questions / rows. Language gap = MRR with the gold page in the question's language − MRR with it "
             "only in another language, with a 95 % interval resampling questions across both sides.", ""]
    for layout in layouts:
        lines += [f"### {layout}", "", "| configuration | n | R@10 | MRR | " +
                  " | ".join(f"{label}: MRR (n)" for _, label in GOLD_PARTS) + " | language gap |",
                  "|---" * 7 + "|"]
        for name, cfg in configs.items():
            part = (cfg.get("layouts") or {}).get(layout)
            if not part:
                continue
            gold = [f"{_value(part.get(key), 'mrr')} ({_n(part.get(key))})" for key, _ in GOLD_PARTS]
            lines.append(f"| {name} | {_n(part['all'])} | {_value(part['all'], 'recall@10')} | "
                         f"{_value(part['all'], 'mrr')} | " + " | ".join(gold) + f" | {_gap_cell(part)} |")
        lines.append("")
    return lines


def layout_figure(configs: dict[str, Any], out: Path) -> Path | None:
    """Per layout, each configuration's MRR with the gold page in the question's language (light) and
    elsewhere (dark): the language gap is the step between the two bars."""
    layouts = sorted({name for cfg in configs.values() for name in cfg.get("layouts") or {}})
    names = [name for name, cfg in configs.items() if cfg.get("layouts")]
    if not layouts or not names:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(layouts), figsize=(max(4.0, 0.55 * len(names)) * len(layouts), 4.2),
                                sharey=True, squeeze=False)
    colours = plt.get_cmap("tab10")
    for axis, layout in zip(axes[0], layouts):
        for index, name in enumerate(names):
            part = configs[name]["layouts"].get(layout) or {}
            for offset, (key, _) in enumerate(GOLD_PARTS):
                value = (part.get(key) or {}).get("mrr")
                if value is not None:
                    axis.bar(index + (offset - 0.5) * 0.4, value, width=0.4, color=colours(index % 10),
                             alpha=0.45 if offset == 0 else 1.0)
        axis.set_title(layout)
        axis.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize="small")
        axis.set_ylim(0, 1)
    axes[0][0].set_ylabel("MRR: gold in Lq (light) | elsewhere (dark)")
    figure.tight_layout()
    path = out / "layouts.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
