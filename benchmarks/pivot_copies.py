"""What pivot copies made at ingest buy, per cell, against what they cost once per passage.

    python benchmarks/pivot_copies.py                          # scattered and unique-country, full size
    python benchmarks/pivot_copies.py --quick --llm qwen2.5-coder-0.5b
    python benchmarks/pivot_copies.py --llm openai:MODEL@URL   # an endpoint translates
    python benchmarks/pivot_copies.py --translator professional  # the ceiling: XQuAD's own English paragraphs
    python benchmarks/pivot_copies.py --datasets xquad-cells --translator professional  # the parallel layout
    python benchmarks/pivot_copies.py --datasets swefaq,mixed  # monolingual (Swedish FAQ) and mixed

The benchmark layouts (by default the two whose pages each exist in one language; ``--datasets`` names any
of ``bench``'s) are built from the shipped data (the same builders, split by article, as ``babelrag
bench``). Every passage not in the pivot language is translated once (``babelrag pivot-copies``), by the
configured translator or, with ``--translator professional``, by XQuAD's own English version of the same
paragraph (XQuAD is a professional translation of SQuAD: what a perfect translator would give, so the
copies' ceiling). The one-time cost is reported per passage (model calls and seconds; a translation served
from the cache keeps the seconds it took when made) with the failed translations by
reason. Then every *test* question is searched with the default preset, and with the default preset plus
the ``pivot_copies`` path; per question language, split by where the gold page is (the question's
language or another), with the language gap, and the difference tested by a sign-flip test in which a
question and its translations flip together (Benjamini–Hochberg across cells). Latency is the median
search time of each configuration in the same loop, warm (query embeddings cached per question across the
two configurations would favour the second: each configuration embeds afresh). Last, whether the learned
model's P(relevant) holds on the copy path, whose own weights it fitted on dev copies only: predicted against observed
per decile, beside the question's own path over the passages, on the same test questions.

Beside them, ``tuned``: ``babelrag tune`` run on the KB's *dev* questions once its copies exist (the relevance model
re-fitted with the copy path, and per cell the question as written or a copy option chosen with shrinkage; none of
them calls a model at query time), then scored on the same test questions as the rest, which tune never reads.
Which option each cell got is printed with the profile. And ``tuned on dev, no selection check``: the same tuning with
the selection check off (``babelrag tune --no-selection-check``), scored on the same test questions: what the check
refused, and whether refusing it cost or saved anything on questions neither version read.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA, bench_store, console, need_data, percentile, table  # noqa: E402

from babelrag.config import preset_config  # noqa: E402
from babelrag.experiments.squad import load_squad_folder  # noqa: E402
from babelrag.evaluate.clusters import cluster_key  # noqa: E402
from babelrag.evaluate.metrics import reciprocal_rank  # noqa: E402
from babelrag.evaluate.significance import MIN_PAIRS, adjust, paired_test  # noqa: E402
from babelrag.experiments.runner import REPORTED, build_data, ensure_indexes  # noqa: E402
from babelrag.ingest.pivot_copies import make_pivot_copies  # noqa: E402
from babelrag.kb import KnowledgeBase  # noqa: E402
from babelrag.models.bundle import Models  # noqa: E402
from babelrag.models.translate import Translation, Translator  # noqa: E402
from babelrag.relevance.features import FEATURES, PIVOT_COPY  # noqa: E402
from babelrag.retrieve.pipeline import Searcher, resolve_rerank  # noqa: E402
from babelrag.tune.fitting import reliability, scores_by_question  # noqa: E402
from babelrag.tune.runner import TuneOptions, summary_lines, tune_or_fall_back, write_profile  # noqa: E402
from babelrag.tune.training import collect  # noqa: E402

CONFIGS = {"vector": ("vector", {}), "default": ("default", {}),
           "pivot copies alone": ("default", {"strategy": "pivot_copies"}),
           "default + pivot copies (max)": ("default", {"extra_paths": ["pivot_copies"]}),
           "default + pivot copies (rrf)": ("default", {"extra_paths": ["pivot_copies"], "merge": "rrf"})}
BASE = "default"
TUNED = "tuned on dev (as written or copies)"
UNCHECKED = "tuned on dev, no selection check"
Configs = dict[str, tuple[str, dict]]


def score(kb: KnowledgeBase, rows: list, configs: Configs) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """MRR@10 per row and search seconds per row, for each configuration (round-robin per question); a configuration
    identical to an earlier one is searched once and reported under both names."""
    first = {name: next(n for n, c in configs.items() if c == config) for name, config in configs.items()}
    searchers = {name: Searcher(kb, preset_config(preset, overrides))
                 for name, (preset, overrides) in configs.items() if first[name] == name}
    mrr, seconds = defaultdict(list), defaultdict(list)
    for row in rows:
        for name, searcher in searchers.items():
            kb.forget_query_vectors()
            started = time.perf_counter()
            result = searcher.search(row.as_question())
            seconds[name].append(time.perf_counter() - started)
            mrr[name].append(reciprocal_rank(result.evidence.doc_ids()[:10], row.gold_pages))
    return {name: mrr[first[name]] for name in configs}, {name: seconds[first[name]] for name in configs}


class ProfessionalEnglish:
    """XQuAD's English paragraph of the page a passage (or a chunk of it) comes from."""

    name = "xquad-professional-en"

    def __init__(self) -> None:
        corpus = load_squad_folder(DATA / "xquad-dev")
        self.english = corpus.pages["en"]
        self.paragraphs = [(text, page) for lang, pages in corpus.pages.items() for page, text in pages.items()]
        self.page_of = {text: page for text, page in self.paragraphs}

    def translate_targets(self, text: str, src: str, targets: list[str]) -> dict[str, Translation]:
        page = self.page_of.get(text) or next((page for whole, page in self.paragraphs if text in whole), None)
        found = self.english.get(page) if page else None
        return {t: Translation(found) if found else Translation("", problem="no English paragraph") for t in targets}


def translator_for(args: argparse.Namespace) -> Translator:
    if args.translator == "professional":
        return ProfessionalEnglish()
    return Models(preset_config("default", {"llm": args.llm, "translator": args.translator})).translator


def where_gold(row) -> str:
    return "in Lq" if row.tags.get("gold_in_question_lang") == "true" else "elsewhere"


def tuned(kb: KnowledgeBase, golden: list, folder: Path) -> Configs:
    """The ``tuned`` configuration: ``babelrag tune`` on the KB's dev questions, with its copies in place (see the
    module's docstring), its profile written to ``folder`` and shown; none when the KB has no dev question. Beside it
    the same tuning without the selection check, which shows what the check changed on questions it never read (where
    the check judged no choice, the two profiles are one: said so, and not scored twice)."""
    configs: Configs = {}
    for name, check, where in ((TUNED, True, folder), (UNCHECKED, False, folder / "no-selection-check")):
        profile, result, fell_back = tune_or_fall_back(kb, golden, TuneOptions(store_with_kb=False,
                                                                               selection_check=check))
        if fell_back:
            console.print(f"{kb.name}: {fell_back}")
        if result is None:  # tuned on nothing: not a configuration of its own
            return {}
        where.mkdir(parents=True, exist_ok=True)
        write_profile(profile, where / f"{kb.name}.yaml")
        console.print(f"[bold]{name}[/]\n" + "\n".join(summary_lines(result)) + f"\nprofile: {where / f'{kb.name}.yaml'}")
        configs[name] = ("tuned", {"profile": str(where)})
        rules = (profile.global_rule, *profile.kbs.values(), *profile.cells.values())
        if check and not any(rule.selection_check for rule in rules):  # nothing judged: without the check, the same profile
            console.print(f"{kb.name}: the selection check judged no rule, so tune without it makes this same profile "
                          "(not tuned or scored again)")
            break
    return configs


VARIANTS = [name for name in CONFIGS if "pivot copies" in name] + [TUNED, UNCHECKED]


def report(index: str, rows: list, mrr: dict[str, list[float]], seconds: dict[str, list[float]]) -> list[dict]:
    """The layout's table (each configuration against the default on the same questions), and the per-cell
    tests of every copy variant against the default (corrected together with the other layouts' later)."""
    clusters = [cluster_key({"id": r.id, "tags": r.tags}) for r in rows]
    # a layout can hold several KBs (parallel: a country's and the pooled one): cells and panels name both
    layout = f"{rows[0].tags.get('layout', index)} ({index.rsplit('-', 1)[0]})"
    summary = []
    for name in mrr:
        values = np.array(mrr[name])
        parts = {part: values[[where_gold(r) == part for r in rows]] for part in ("in Lq", "elsewhere")}
        means = {part: float(v.mean()) if len(v) else float("nan") for part, v in parts.items()}
        test = paired_test(mrr[BASE], mrr[name], clusters=clusters) if name != BASE else {"delta": 0.0, "p": None}
        summary.append([name, float(values.mean()), f"{test['delta']:+.3f}", "–" if test["p"] is None else test["p"],
                        means["in Lq"], len(parts["in Lq"]), means["elsewhere"], len(parts["elsewhere"]),
                        means["in Lq"] - means["elsewhere"], percentile(seconds[name], 50) * 1000])
    table(f"{layout}, {index}: {len(rows)} test rows, {len(set(clusters))} questions (p: sign-flip by question)",
          ["config", "MRR@10", "Δ vs default", "p", "gold in Lq", "n", "gold elsewhere", "n", "gap", "p50 ms"], summary)
    if TUNED in mrr and UNCHECKED in mrr:
        check = paired_test(mrr[UNCHECKED], mrr[TUNED], clusters=clusters)
        changed = sum(a != b for a, b in zip(mrr[UNCHECKED], mrr[TUNED]))
        p = "–" if check["p"] is None else format(check["p"], ".3f")
        console.print(f"the selection check on test: tuned {check['delta']:+.4f} against tune without it (p {p}; "
                      f"{changed} of {len(rows)} rows scored differently)")
    cells = []
    for lang in sorted({r.lang for r in rows}):
        chosen = [i for i, r in enumerate(rows) if r.lang == lang]
        for variant in (v for v in VARIANTS if v in mrr):
            test = paired_test([mrr[BASE][i] for i in chosen], [mrr[variant][i] for i in chosen],
                               clusters=[clusters[i] for i in chosen])
            if test["clusters"] < MIN_PAIRS:  # too few questions to reach significance after correction: untested
                test["p"] = None
            cells.append({"layout": layout, "lang": lang, "variant": variant, "n": len(chosen),
                          "base": float(np.mean([mrr[BASE][i] for i in chosen])),
                          "with": float(np.mean([mrr[variant][i] for i in chosen])), **test})
    return cells


def path_scores(kb: KnowledgeBase, rows: list) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per index searched (the passages, the copies): every candidate of each row's as-written path, with the
    P(relevant) the default's model gives it and whether its page is gold."""
    config = preset_config("default")
    model = resolve_rerank(kb, config)[1]
    if model is None:
        raise SystemExit(f"{kb.name}: no relevance model fits its embedder; nothing to check")
    found = collect(kb, rows, config, translated_paths=False)  # the question over the passages and the copies
    scores, copy = scores_by_question(model, found), found.rows[:, FEATURES.index(PIVOT_COPY)] > 0
    return {"passages": (scores[~copy], found.labels[~copy]), "pivot_copies": (scores[copy], found.labels[copy])}


def reliability_report(found: dict[str, tuple[list[np.ndarray], list[np.ndarray]]]) -> None:
    for index, (scores, labels) in found.items():
        predicted, observed = np.concatenate(scores), np.concatenate(labels)
        table(f"Reliability on test, the as-written path over the {index.replace('_', ' ')} "
              f"({len(predicted)} candidates; mean predicted {predicted.mean():.4f}, observed {observed.mean():.4f})",
              ["decile", "candidates", "predicted", "observed", "gap"],
              [[i + 1, n, p, o, o - p] for i, (n, p, o) in enumerate(reliability(predicted, observed))])


def picture(cells: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layouts = list(dict.fromkeys(c["layout"] for c in cells))
    figure, axes = plt.subplots(1, len(layouts), figsize=(7 * len(layouts), 4), squeeze=False)
    variants = [v for v in VARIANTS if any(c["variant"] == v for c in cells)]
    width = 0.8 / (len(variants) + 1)
    for axis, layout in zip(axes[0], layouts):
        mine = [c for c in cells if c["layout"] == layout]
        langs = list(dict.fromkeys(c["lang"] for c in mine))
        x = np.arange(len(langs))
        base = {c["lang"]: c["base"] for c in mine}
        axis.bar(x - 0.4 + width / 2, [base[lang] for lang in langs], width, label=BASE)
        for n, variant in enumerate(variants, start=1):
            found = {c["lang"]: c["with"] for c in mine if c["variant"] == variant}
            axis.bar(x - 0.4 + width / 2 + n * width, [found.get(lang, np.nan) for lang in langs], width,
                     label=variant)
        axis.set_xticks(x, langs)
        axis.set_ylim(0, 1)
        axis.set_title(f"{layout}: MRR@10 per question language")
    axes[0][0].legend(loc="lower left", fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default="scattered,unique-country")
    parser.add_argument("--quick", action="store_true", help="the bench's quick sizes")
    parser.add_argument("--llm", default="qwen2.5-coder-0.5b")
    parser.add_argument("--translator", default="llm", help="llm | mt:PATH | professional")
    parser.add_argument("--lang", default="en")
    parser.add_argument("--seed", type=int, default=13, help="deals the layouts (as `bench --seed`); the dev/test "
                                                            "split is by article either way")
    parser.add_argument("--out", type=Path, default=Path(bench_store()).parent / "pivot-copies")
    args = parser.parse_args()
    # the default seed's outputs keep their folder; another seed's layouts are other KBs, kept apart
    dealt = "" if args.seed == parser.get_default("seed") else f"-seed{args.seed}"
    sample = ("quick" if args.quick else "full") + dealt
    need_data()
    os.environ.setdefault("BABELRAG_EMBED_CACHE", "1")
    store = bench_store()
    data = build_data(DATA, args.out / sample, args.quick, args.seed, args.datasets.split(","))
    ensure_indexes(data.indexes, store)
    translator = translator_for(args)
    cells: list[dict] = []
    profiles = args.out / "tuned-profiles" / sample
    paths: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {"passages": ([], []), "pivot_copies": ([], [])}
    for index in data.indexes:
        rows = [q for q in data.golden if q.index == index and q.tags.get("split") == REPORTED]
        # queries embedded by the bare model: the persistent embedding cache would serve every configuration after
        # the first a question's vector, and time cache states instead of methods
        with KnowledgeBase.open(index, store, cached_queries=False) as kb:
            made = make_pivot_copies(kb, translator, args.lang)
            console.print(f"[bold]{index}[/]: {kb.manifest.passages} passages; pivot copies: {made.summary()}")
            mrr, seconds = score(kb, rows, {**CONFIGS, **tuned(kb, data.golden, profiles)})
            for name, (scores, labels) in path_scores(kb, rows).items():
                paths[name][0].append(scores)
                paths[name][1].append(labels)
        cells.extend(report(index, rows, mrr, seconds))
    adjust(cells)
    table("each copy variant vs default per question language (MRR@10; p sign-flip by question, BH across all cells)",
          ["layout", "lang", "variant", "rows", "default", "variant", "Δ", "p_adj"],
          [[c["layout"], c["lang"], c["variant"], c["n"], c["base"], c["with"], f"{c['with'] - c['base']:+.3f}",
            c["p_adj"] if c["p_adj"] is not None else "–"] for c in cells])
    args.out.mkdir(parents=True, exist_ok=True)
    drawn = args.out / f"pivot_copies-{sample}-{translator.name.replace(':', '_').replace('/', '_')}.png"
    picture(cells, drawn)
    console.print(f"picture: {drawn}")
    reliability_report(paths)


if __name__ == "__main__":
    main()
