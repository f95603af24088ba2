"""How ``tune``'s relevance refit does on test articles, over many deals of the bench's quick sample.

    python benchmarks/refit_rule.py --seeds 101-110            # candidates collected once per seed, then cached
    python benchmarks/refit_rule.py --seeds 111-120 --rules shipped,one-error,anchored:0.1
    python benchmarks/refit_rule.py --full --seeds 201 --rules shipped,one-error   # 20 minutes: every fit on every row

``bench --quick --seed N --ladder tune`` refits the relevance model per KB on that KB's dev questions (a few
articles) and takes a refit over the shipped model when it beats it in cross-validation by more than a standard
error (``tune/fitting.py: fit_selected``). Measured that way the refits lost on test in four of five cases, and a
bench run costs over half an hour, so this benchmark measures only the relevance model's part, on many deals at
once: per seed, the quick sample as ``bench --seed`` deals it; per KB, its dev questions collected as ``tune``
collects them (every path: the question as written and its translations) and its test questions as written;
then each rule's model ranks the test questions' candidates (MRR@10 of the as-written path, as the learned
stage orders them).

Rules (``--rules``): ``shipped`` (``tune --keep-model``); ``current`` (``fit_selected``, the rule ``tune`` uses:
below ``MIN_REFIT_ARTICLES`` dev articles only the one-weight hybrid refit competes with the shipped model);
``line-for-both`` (the rule of 7 December: below that line no refit at all); ``one-error`` (the same
one-standard-error choice among the shipped model and the refits whatever the articles, the rule before;
``one-error:article``: its folds and errors by article); ``full`` and ``hybrid`` (that refit, always);
``anchored`` (every feature refitted with its weights shrunk toward the shipped model's instead of toward zero,
``relevance/learn.py: fit(anchor=)``, always; ``anchored:C`` at another strength ``C``, smaller holding it closer).

Candidates are cached per deal (``--cache``; delete them after a change to the features). SweFAQ is the same KB and
the same questions in every deal, so it is one case per deal but the same questions (the errors cluster them).
Test questions the shipped model was fitted on (the shipped data's dev articles of seed 13 by article, which other
seeds deal into test too) are left out of every figure: no rule may be scored where the shipped weights saw the
answer. Each figure is a mean over test rows (a KB's question; a question and its translations are one sample for the errors, in
every deal that tests it), over all layouts and per layout split by whether the gold page is in the question's language;
a rule's difference from ``shipped`` is paired on the same questions, with a sign-flip p clustered by question.
"""
from __future__ import annotations

import argparse
import pickle
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA, bench_store, console, need_data, table  # noqa: E402

from babelrag.config import preset_config  # noqa: E402
from babelrag.evaluate.clusters import cluster_key, clustered_standard_error  # noqa: E402
from babelrag.evaluate.significance import paired_test  # noqa: E402
from babelrag.experiments.runner import build_data, ensure_indexes  # noqa: E402
from babelrag.kb import KnowledgeBase  # noqa: E402
from babelrag.relevance.features import MODEL_FEATURES  # noqa: E402
from babelrag.relevance.learn import fit  # noqa: E402
from babelrag.relevance.model import RelevanceModel, default_model, question_hash  # noqa: E402
from babelrag.tune.fitting import (MIN_HYBRID_REFIT_ARTICLES, MIN_REFIT_ARTICLES, dev_articles,  # noqa: E402
                                   fit_crossfitted, fit_selected, reciprocal_ranks)
from babelrag.tune.runner import FULL_MODEL_QUESTIONS, TuneOptions  # noqa: E402
from babelrag.tune.training import Candidates, collect  # noqa: E402

Case = dict  # one (seed, KB): dev and test candidates, the dev articles' count
Rule = Callable[[Candidates, RelevanceModel], tuple[RelevanceModel, str]]


def seeds(text: str) -> list[int]:
    """``101-106`` or ``13,29,41``."""
    out: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        out.extend(range(int(low), int(high or low) + 1))
    return out


def collect_seed(seed: int, cache_dir: Path, full: bool) -> list[Case]:
    """Every KB of the quick sample dealt by ``seed`` with enough dev questions for ``tune`` to fit: its dev
    candidates as ``tune`` collects them and its test questions' as-written candidates (cached per seed)."""
    cached = cache_dir / f"refit-candidates-{'full' if full else 'quick'}-{seed}.pkl"
    if cached.exists():
        return pickle.loads(cached.read_bytes())
    store = bench_store()
    data = build_data(DATA, Path(tempfile.mkdtemp()), quick=not full, seed=seed)
    ensure_indexes(data.indexes, store)
    config = preset_config("+country")
    cases = []
    for index in sorted(data.indexes):
        mine = [q for q in data.golden if (q.index or q.kb) == index]
        dev = [q for q in mine if q.tags.get("split") == "dev"]
        test = [q for q in mine if q.tags.get("split") == "test"]
        asked = len({cluster_key(q.model_dump()) for q in dev})
        if asked < TuneOptions().min_dev or not test:  # tune keeps the shipped model: nothing to compare
            continue
        with KnowledgeBase.open(index, store) as kb:
            cases.append({"seed": seed, "kb": index, "layout": mine[0].tags.get("layout", ""), "asked": asked,
                          "articles": dev_articles(dev),
                          "dev": collect(kb, dev, config, golden=dev),
                          "test": collect(kb, test, config, translated_paths=False)})
    cache_dir.mkdir(parents=True, exist_ok=True)
    cached.write_bytes(pickle.dumps(cases))
    return cases


def anchored(c: float) -> Rule:
    def rule(dev: Candidates, shipped: RelevanceModel) -> tuple[RelevanceModel, str]:
        model = fit(dev.rows, dev.labels, dev.path_keys(), {"name": "anchored"}, c, MODEL_FEATURES, anchor=shipped)
        return model, "anchored"
    return rule


def selected(min_articles: int = MIN_REFIT_ARTICLES, unit: str = "question",
             min_hybrid_articles: int = MIN_HYBRID_REFIT_ARTICLES) -> Rule:
    """``fit_selected`` as ``tune`` runs it, the full refit tried from ``min_articles`` dev articles on and the hybrid
    one from ``min_hybrid_articles``, its folds and standard errors by ``unit``."""
    def rule(dev: Candidates, shipped: RelevanceModel) -> tuple[RelevanceModel, str]:
        grouped = replace(dev, groups=[cluster_key(q.model_dump(), unit) for q in dev.asked])
        if len(set(grouped.groups)) < 2:  # one dev article, folds by article: nothing to cross-validate a refit on
            return shipped, "shipped: one group"
        model, report = fit_selected(grouped, {"name": "tuned"}, shipped, FULL_MODEL_QUESTIONS, texts=dev.texts,
                                     min_articles=min_articles, min_hybrid_articles=min_hybrid_articles)
        return model, report["variant"]
    return rule


def always(variant: str, features: tuple[str, ...]) -> Rule:
    def rule(dev: Candidates, shipped: RelevanceModel) -> tuple[RelevanceModel, str]:
        return fit_crossfitted(dev, {"name": variant}, features=features), variant
    return rule


RULES: dict[str, Rule] = {"shipped": lambda dev, shipped: (shipped, "shipped"), "current": selected(),
                          "line-for-both": selected(min_hybrid_articles=MIN_REFIT_ARTICLES),
                          "one-error": selected(0), "one-error:article": selected(0, "article"),
                          "full": always("full", MODEL_FEATURES), "hybrid": always("hybrid", ("hybrid",)),
                          "anchored": anchored(1.0)}


def rule_named(name: str) -> Rule:
    if name.startswith("anchored:"):
        return anchored(float(name.split(":", 1)[1]))
    if name not in RULES:
        raise SystemExit(f"unknown rule {name!r}: one of {', '.join(RULES)} or anchored:C")
    return RULES[name]


def unseen(test: Candidates, shipped: RelevanceModel) -> np.ndarray:
    """Per test question, whether the shipped model was not fitted on it (nor on a translation of it)."""
    seen = set(shipped.meta.get("question_hashes") or ()) | set(shipped.fold_of)
    groups_seen = {group for group, text in zip(test.groups, test.texts) if question_hash(text) in seen}
    return np.array([group not in groups_seen for group in test.groups])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="101-110", help="deals of the quick sample, e.g. 101-106 or 13,29,41")
    parser.add_argument("--rules", default="shipped,current,one-error,full,anchored,anchored:0.1")
    parser.add_argument("--full", action="store_true", help="the whole sample, as bench without --quick deals it")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()),
                        help="folder for the collected candidates, one file per seed")
    args = parser.parse_args()
    need_data()
    shipped = default_model()
    names = args.rules.split(",")
    rules = {name: rule_named(name) for name in names}
    ranks: dict[str, list[np.ndarray]] = {name: [] for name in names}
    clusters: list[np.ndarray] = []
    sides: list[np.ndarray] = []  # per question: its layout and whether its gold page is in its language
    rows = []
    for seed in seeds(args.seeds):
        for case in collect_seed(seed, args.cache, args.full):
            test = case["test"]
            keep = unseen(test, shipped)
            questions, _ = reciprocal_ranks(test, np.zeros(len(test.rows)))
            questions = questions[keep[questions]]
            if not len(questions):
                continue
            row = [f"{seed} {case['kb'][:24]}", case["layout"], case["articles"], case["asked"], len(questions)]
            for name, rule in rules.items():
                model, chosen = rule(case["dev"], shipped)
                asked, rr = reciprocal_ranks(test, model.predict(test.rows, test.path_keys()))
                by_question = dict(zip(asked.tolist(), rr.tolist()))
                ranks[name].append(np.array([by_question.get(q, 0.0) for q in questions.tolist()]))
                row.append(f"{ranks[name][-1].mean():.3f}" + (f" ({chosen})" if name.startswith(("current", "line-", "one-error")) else ""))
            clusters.append(np.array([test.groups[q] for q in questions], dtype=object))  # a question, whatever the deal
            sides.append(np.array([f"{case['layout']}|{test.asked[q].tags.get('gold_in_question_lang', 'true')}"
                                   for q in questions], dtype=object))  # SweFAQ's are all in their language
            rows.append(row)
            console.print(" · ".join(str(v) for v in row), highlight=False)  # a full deal's fits take minutes
    table("test MRR@10 per (seed, KB), questions the shipped model never saw", ["case", "layout", "dev articles",
          "dev questions", "test questions", *names], rows)
    every = np.concatenate(clusters)
    base = np.concatenate(ranks["shipped"]) if "shipped" in ranks else None
    summary = []
    for name in names:
        mine = np.concatenate(ranks[name])
        line: list[object] = [name, float(mine.mean())]
        if base is not None and name != "shipped":
            gaps = mine - base
            won = sum(a.mean() > b.mean() + 1e-9 for a, b in zip(ranks[name], ranks["shipped"]))
            lost = sum(a.mean() < b.mean() - 1e-9 for a, b in zip(ranks[name], ranks["shipped"]))
            line += [float(gaps.mean()), clustered_standard_error(gaps, list(every)),
                     paired_test(base.tolist(), mine.tolist(), clusters=list(every))["p"], f"{won} / {lost}"]
        summary.append(line)
    table(f"over {len(rows)} cases, {len(every)} test rows (a KB's question)", ["rule", "MRR@10", "Δ vs shipped",
          "SE (by question)", "p", "cases won / lost"], summary)
    if base is not None:
        split_table(names, ranks, base, np.concatenate(sides))


def split_table(names: list[str], ranks: dict[str, list[np.ndarray]], base: np.ndarray, sides: np.ndarray) -> None:
    """Each rule's Δ against the shipped model per layout, for questions whose gold page is in their language and for
    the others (rows of each side, the shipped model's MRR beside)."""
    rows = []
    for layout in sorted({side.split("|")[0] for side in sides}):
        for name in (n for n in names if n != "shipped"):
            gaps = np.concatenate(ranks[name]) - base
            line: list[object] = [layout, name]
            for inside in ("true", "false"):
                mine = sides == f"{layout}|{inside}"
                line += [int(mine.sum()), float(base[mine].mean()) if mine.any() else float("nan"),
                         float(gaps[mine].mean()) if mine.any() else float("nan")]
            rows.append(line)
    table("Δ vs shipped per layout, gold page in the question's language or elsewhere", ["layout", "rule",
          "rows: gold in Lq", "shipped", "Δ", "rows: elsewhere", "shipped", "Δ"], rows)


if __name__ == "__main__":
    main()
