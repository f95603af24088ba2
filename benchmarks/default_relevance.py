"""Fit the relevance model the package ships (``src/babelrag/relevance/default_model.json``) and say how
good it is, layout by layout.

    python benchmarks/default_relevance.py                  # choose features, fit, report, write the model
    python benchmarks/default_relevance.py --check          # report the shipped model only
    python benchmarks/default_relevance.py --cache c.pkl    # keep the collected candidates between runs
    python benchmarks/default_relevance.py --check --before old.json   # the shipped model against another
    python benchmarks/default_relevance.py --calibrate-copies   # add the pivot-copy path's weights and calibration
    python benchmarks/default_relevance.py --calibrate-copies --copies-translator professional
    python benchmarks/default_relevance.py --carry-copies old.json   # keep old.json's pivot-copy weights after a refit

Training data: the dev split (by article) of every benchmark layout built from the shipped data —
parallel (XQuAD country KBs and the pooled KB), unique-country, scattered (each page in one language),
mixed (SweFAQ beside XQuAD) and monolingual (SweFAQ). Paths per question: as written, its professional
translations from the golden set (translated paths) and a DELTA-shaped fused query (a generated path).
Everything is grouped by *article*: cross-validation folds and the fold models that score the model's own
training questions keep a question, its translations and every page of its article on one side, so no
figure here — nor any later figure on these questions — is in-sample.

Reported on the test split (articles never used to fit or choose): MRR@10 of the question-as-written path
per layout, split by where the gold page is (the question's language or another), against plain dense
and hybrid order; reliability per decile per path type (as written, translated, generated) and of each path's
top hit; every path of a sample of test questions max-merged (where the calibration decides the order), against
the model before (``--before FILE``: any model file); and leave one question language out, per layout. Timing is
not measured here (``benchmarks/latency.py``).

The shared weights are never fitted on pivot-copy paths (the question over the passages' pivot-language copies):
ranked by them, the copies came out worse than by their plain cosine. With ``--calibrate-copies`` the shipped model
gets weights of its own for copy paths (``relevance/learn.py: fit_kind``) and their calibration, the other kinds
unchanged: every dev question of the
scattered and unique-country layouts searched over copies made by ``--copies-translator`` — by default the local
model ``babelrag pivot-copies`` uses by default (qwen2.5-coder-0.5b), so an untuned KB's copies are judged as
they will usually have been made; ``professional`` is XQuAD's own English paragraphs (``benchmarks/pivot_copies.py``)
— each fold model fitted and calibrated without the questions it holds out. How much a copy is worth depends on its
translator: copies from a better one are under-rated by this calibration, and ``babelrag tune`` calibrates a KB's
own copies on its own dev questions. ``benchmarks/pivot_copies.py`` reports the copy path's reliability on test
questions. Making the copies costs a model call per passage (hours with the local model on two cores), so a refit of
the shared weights can instead keep an earlier model's copy weights and calibration with ``--carry-copies FILE``
(``relevance/learn.py: carry_kind``): re-expressed on the refit's standardisation, they give copy paths exactly the
probabilities they had; the fold models then rank copies by their shared weights.
"""
from __future__ import annotations

import argparse
import hashlib
from dataclasses import replace
import json
import pickle
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA, ROOT, bench_store, need_data, table  # noqa: E402

from babelrag.experiments.runner import build_data, ensure_indexes  # noqa: E402
from babelrag.config import preset_config  # noqa: E402
from babelrag.evaluate.calibrate import calibrate_threshold, written  # noqa: E402
from babelrag.evaluate.clusters import bootstrap_gap_ci, cluster_key  # noqa: E402
from babelrag.evaluate.significance import paired_test  # noqa: E402
from babelrag.kb import KnowledgeBase  # noqa: E402
from babelrag.relevance.features import FEATURES, KEYWORD_WEIGHT, MODEL_FEATURES, MONO, PIVOT_COPY  # noqa: E402
from babelrag.ingest.pivot_copies import make_pivot_copies  # noqa: E402
from babelrag.models.bundle import Models  # noqa: E402
from babelrag.relevance.learn import carry_kind, fit, fit_kind  # noqa: E402
from babelrag.relevance.model import RelevanceModel, default_model  # noqa: E402
from babelrag.tune.fitting import (  # noqa: E402
    fit_crossfitted, out_of_fold_rows, out_of_fold_scores, path_mrr, reciprocal_ranks, reliability, scores_by_question,
    top_of_each_path,
)
from babelrag.tune.training import Candidates, collect  # noqa: E402

TARGET = ROOT / "src" / "babelrag" / "relevance" / "default_model.json"
SAMPLE = 60  # test questions per layout (each in every language asked) for reliability per path type
Scores = Callable[[Candidates], np.ndarray]
# what each feature set adds; the shipped model takes the one with the best mean over layouts of the CV MRR on
# dev (each layout counts once, however many questions it has)
CANDIDATE_SETS: dict[str, tuple[str, ...]] = {
    "hybrid order (1 feature)": ("hybrid",),
    "first release's features": tuple(f"{name}:cross" for name in FEATURES[:20]) + MONO,
    "+ language bias taken out": tuple(f"{name}:cross" for name in FEATURES[:28]) + MONO,
    "+ per-language peers and pages": tuple(
        f"{name}:cross" for name in FEATURES[:FEATURES.index("pool_size") + 1] if name not in MONO) + MONO,
    "+ parallel share": tuple(name for name in MODEL_FEATURES if not name.startswith("centered")),
    "+ language centroids (all)": MODEL_FEATURES,
}


def column(candidates: Candidates, name: str) -> np.ndarray:
    return candidates.rows[:, FEATURES.index(name)]


def hybrid_order(candidates: Candidates) -> np.ndarray:
    """The zscore fusion every hybrid search uses."""
    return column(candidates, "dense_z") + KEYWORD_WEIGHT * column(candidates, "bm25_z")


def dense_order(candidates: Candidates) -> np.ndarray:
    return column(candidates, "dense")


def collect_all(cache: Path | None) -> tuple[dict[str, dict[str, Candidates]], str]:
    """Candidates per layout (every index of a layout concatenated): ``dev`` (every path: training), ``test``
    (the as-written path of every test question) and ``sample`` (every path of ``SAMPLE`` test questions,
    for reliability per path type); and the embedder's fingerprint."""
    if cache and cache.exists():
        return pickle.loads(cache.read_bytes())
    store = bench_store()
    data = build_data(DATA, Path(tempfile.mkdtemp()), quick=False, seed=13)
    ensure_indexes(data.indexes, store)
    config = preset_config("+country")  # candidates as the reranked presets retrieve them (country filter on)
    parts: dict[str, dict[str, list[Candidates]]] = {}
    fingerprint = ""
    for index in sorted(data.indexes):
        with KnowledgeBase.open(index, store) as kb:
            fingerprint = kb.embedder.fingerprint()
            for layout in sorted({q.tags.get("layout", "") for q in data.golden if q.index == index}):
                mine = [q for q in data.golden if q.index == index and q.tags.get("layout") == layout]
                dev, test = ([q for q in mine if q.tags.get("split") == split] for split in ("dev", "test"))
                for part, chosen, every_path in (("dev", dev, True), ("test", test, False),
                                                 ("sample", every_version(test, SAMPLE), True)):
                    if chosen:
                        parts.setdefault(layout, {}).setdefault(part, []).append(collect(
                            kb, chosen, config, golden=chosen, unit="article", generated=every_path,
                            translated_paths=every_path, copies=False))  # copies: --calibrate-copies
    result = ({layout: {part: Candidates.concat(found) for part, found in splits.items()}
               for layout, splits in parts.items()}, fingerprint)
    if cache:
        cache.write_bytes(pickle.dumps(result))
    return result


def calibrate_copies(model: RelevanceModel, translator: str) -> RelevanceModel:
    """``model`` with weights and a calibration of its own for pivot-copy paths, from the dev questions of the layouts
    whose pages each exist in one language, over copies by ``translator`` (see the module's docstring)."""
    from pivot_copies import ProfessionalEnglish

    made_by = ProfessionalEnglish() if translator == "professional" else Models(
        preset_config("default", {"llm": translator})).translator
    store = bench_store()
    data = build_data(DATA, Path(tempfile.mkdtemp()), quick=False, seed=13, datasets=["scattered", "unique-country"])
    ensure_indexes(data.indexes, store)
    parts = []
    for index in sorted(data.indexes):
        with KnowledgeBase.open(index, store) as kb:
            print(f"{index}: pivot copies {make_pivot_copies(kb, made_by).summary()}")
            dev = [q for q in data.golden if q.index == index and q.tags.get("split") == "dev"]
            parts.append(collect(kb, dev, preset_config("default"), translated_paths=False))  # as written, copies
    found = Candidates.concat(parts)
    copy = column(found, PIVOT_COPY) > 0
    texts = [found.asked[i].question for i in found.question[copy]]
    calibrated = fit_kind(model, "pivot_copies", found.rows[copy], found.labels[copy], texts, found.path_keys()[copy],
                          float(model.meta.get("C", 1.0)))
    for name, scored in (("before", model), ("after", calibrated)):
        scores = scores_by_question(scored, found)
        cosine = path_mrr(found, dense_order(found), rows=copy)
        table(f"pivot-copy paths on dev ({len(set(texts))} question rows, out-of-fold), {name}: MRR@10 "
              f"{path_mrr(found, scores, rows=copy):.3f} (by the cosine alone {cosine:.3f})",
              ["decile", "candidates", "predicted", "observed", "gap"],
              [[i + 1, n, p, o, o - p] for i, (n, p, o) in enumerate(reliability(scores[copy], found.labels[copy]))])
    print("copy-path weights (per standard deviation):", calibrated.weights("pivot_copies"))
    return replace(calibrated, meta={**calibrated.meta, "pivot_copies_calibration": {
        "question_rows": len(set(texts)), "candidates": int(copy.sum()),
        "copies": made_by.name, "layouts": "scattered, unique-country"}})


def every_version(questions: list, count: int) -> list:
    """``count`` questions (by a hash of their qid) in every language they were asked in: translated paths
    need a question's other versions."""
    qids = sorted({q.tags.get("qid", q.id) for q in questions}, key=lambda qid: hashlib.sha1(qid.encode()).hexdigest())
    keep = set(qids[:count])
    return [q for q in questions if q.tags.get("qid", q.id) in keep]


def gold_in_lang(candidates: Candidates, inside: bool) -> Candidates:
    """Only the questions whose gold page exists in their language (``inside``), or only the others (the
    golden set's ``gold_in_question_lang`` tag)."""
    flag = "true" if inside else "false"
    return candidates.select([q.id for q in candidates.asked if q.tags.get("gold_in_question_lang") == flag])


def layout_rows(test: dict[str, Candidates], scorers: dict[str, Scores]) -> list[list[object]]:
    rows = []
    for layout, candidates in test.items():
        for name, scores in scorers.items():
            inside, outside = gold_in_lang(candidates, True), gold_in_lang(candidates, False)
            whole = scores(candidates)
            values = [path_mrr(candidates, whole), *[path_mrr(part, scores(part)) if len(part.rows) else float("nan")
                                                     for part in (inside, outside)]]
            rows.append([layout, name, len(set(candidates.qids)), len(np.unique(candidates.question)), *values,
                         values[1] - values[2], gap_interval(candidates, whole)])
    return rows


def gap_interval(candidates: Candidates, scores: np.ndarray) -> str:
    """The language gap's 95 % interval, resampling questions across both sides at once (a question's
    translations can find its page in their own language and elsewhere); untagged questions are on neither."""
    numbers, ranks = reciprocal_ranks(candidates, scores)
    sides = np.array([candidates.asked[number].tags.get("gold_in_question_lang") for number in numbers], dtype=object)
    tagged = np.isin(sides, ["true", "false"])
    low, high = bootstrap_gap_ci(ranks[tagged], sides[tagged] == "true",
                                 [cluster_key(candidates.asked[number].model_dump()) for number in numbers[tagged]])
    return "–" if np.isnan(low) else f"[{low:+.3f}, {high:+.3f}]"


def choose_features(dev: dict[str, Candidates]) -> tuple[str, dict[str, dict[str, float]]]:
    """Each candidate feature set's grouped-CV MRR on every layout's dev questions (scored by a model fitted on
    the other folds of all layouts); the set with the best mean over layouts wins (ties: the first listed)."""
    pooled = Candidates.concat(list(dev.values()))
    starts = np.cumsum([0, *(len(c.asked) for c in dev.values())])
    found: dict[str, dict[str, float]] = {}
    for name, features in CANDIDATE_SETS.items():
        scores = out_of_fold_scores(pooled, features)
        found[name] = {}
        for (layout, part), start, end in zip(dev.items(), starts[:-1], starts[1:]):
            rows = (pooled.question >= start) & (pooled.question < end)
            found[name][layout] = path_mrr(part, scores[rows])
    best = max(found, key=lambda name: float(np.mean(list(found[name].values()))))
    return best, found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="report the shipped model, write nothing")
    parser.add_argument("--cache", type=Path, help="pickle of the collected candidates (read if present)")
    copies = parser.add_mutually_exclusive_group()
    copies.add_argument("--calibrate-copies", action="store_true",
                        help="fit the shipped model's weights and calibration for pivot-copy paths (the other "
                        "kinds unchanged) and write it")
    copies.add_argument("--carry-copies", type=Path, metavar="FILE",
                        help="give the shipped model FILE's weights and calibration for pivot-copy paths, re-expressed "
                        "on its standardisation (after a refit, instead of making the copies again), and write it")
    parser.add_argument("--copies-translator", default="qwen2.5-coder-0.5b",
                        help="who makes the copies --calibrate-copies calibrates on: an LLM, or professional")
    parser.add_argument("--before", type=Path, help="the model to compare against, a model file (default: the shipped "
                        "model as it was when the run started; with --check, none)")
    parser.add_argument("--features", choices=list(CANDIDATE_SETS), help="fit this feature set without comparing "
                        "the sets by cross-validation first (the comparison takes most of the run)")
    args = parser.parse_args()
    need_data()
    if args.calibrate_copies:
        calibrated = calibrate_copies(default_model(), args.copies_translator)
        TARGET.write_text(json.dumps(calibrated.to_dict(), indent=1) + "\n", encoding="utf-8")
        print(f"written {TARGET}: weights and calibration for pivot-copy paths")
        return
    if args.carry_copies:
        source = RelevanceModel.from_dict(json.loads(args.carry_copies.read_text(encoding="utf-8")))
        carried = carry_kind(source, default_model(), "pivot_copies")
        carried = replace(carried, meta={**carried.meta, "pivot_copies_calibration": {
            **source.meta.get("pivot_copies_calibration", {}),
            "carried_from": f"the model fitted {source.meta.get('fitted_at', '?')} on "
                            f"{source.meta.get('trained_on', '?')}"}})
        TARGET.write_text(json.dumps(carried.to_dict(), indent=1) + "\n", encoding="utf-8")
        print(f"written {TARGET}: pivot-copy weights and calibration carried over from {args.carry_copies.name}")
        return
    candidates, fingerprint = collect_all(args.cache)
    dev = {layout: splits["dev"] for layout, splits in candidates.items() if "dev" in splits}
    test = {layout: splits["test"] for layout, splits in candidates.items() if "test" in splits}
    # with --check and no --before there is nothing to compare with: the shipped model is the model itself
    before = RelevanceModel.from_dict(json.loads(args.before.read_text(encoding="utf-8"))) if args.before else \
        None if args.check else default_model()
    if before is not None and not before.fits(fingerprint):
        raise SystemExit("the model compared against was fitted on another embedder's cosines, or reads features this "
                         "version does not compute")
    if args.check:
        model = default_model()
    else:
        chosen, cv = (args.features, {}) if args.features else choose_features(dev)
        table("Feature sets: grouped-CV MRR@10 on dev (folds by article), per layout",
              ["feature set", *sorted(dev), "mean", "worst"],
              [[name, *[scores[layout] for layout in sorted(dev)], float(np.mean(list(scores.values()))),
                min(scores.values())] for name, scores in cv.items()])
        pooled = Candidates.concat(list(dev.values()))
        model = fit_crossfitted(pooled, {
            "name": "default", "embedder": fingerprint, "variant": chosen,
            "trained_on": f"the shipped data's dev split by article ({len(set(pooled.qids))} questions, "
                          f"{len(pooled.ids)} question rows, layouts {', '.join(sorted(dev))}); XQuAD is CC BY-SA 4.0, "
                          f"SweFAQ CC BY 4.0", "questions": len(set(pooled.qids)),
            "cv_mrr": {name: {k: round(v, 4) for k, v in scores.items()} for name, scores in cv.items()},
            "feature_choice": "given with --features: no comparison run" if args.features else
                              "the best mean over layouts of the grouped-CV MRR on dev (cv_mrr)"},
            features=CANDIDATE_SETS[chosen])
        # `threshold: auto`: calibrated on out-of-fold scores of the as-written path, each question counted once
        tau = calibrate_threshold(out_of_fold_rows(model, pooled), split=None, allow_all=True)
        model = replace(model, meta={**model.meta, "threshold": None if tau["threshold"] is None else written(tau["threshold"]),
                                     "threshold_calibration": {k: tau[k] for k in ("n", "rows", "budget")},
                                     "path_lang_mrr": path_language_mrr(pooled)})
        TARGET.write_text(json.dumps(model.to_dict(), indent=1) + "\n", encoding="utf-8")
        print(f"written {TARGET}: features {chosen}, τ {model.meta['threshold']} from {tau['n']} questions")
    scorers: dict[str, Scores] = {"dense": dense_order, "hybrid order": hybrid_order,
                                  **({"model before": lambda c: before.predict(c.rows, c.path_keys())}
                                     if before else {}),
                                  "model": lambda c: model.predict(c.rows, c.path_keys())}
    table("MRR@10 of the question-as-written path on test articles, by where the gold page is",
          ["layout", "order", "questions", "rows", "MRR", "gold in Lq", "gold elsewhere", "language gap", "gap 95 %"],
          layout_rows(test, scorers))
    sample = {layout: splits["sample"] for layout, splits in candidates.items() if "sample" in splits}
    reliability_report(model, sample)
    if before is not None:
        merged_paths_report(before, model, sample)
    print("weights (per standard deviation):", model.weights())
    leave_one_language_out(dev, test, model.features)


def path_language_mrr(candidates: Candidates) -> dict[str, float]:
    """How well translated paths into each language found the gold on dev (MRR@10 in retrieval order): how
    KB-language targets that tie on the KB's language mix are ordered."""
    found: dict[str, list[float]] = {}
    translated = column(candidates, "translated") > 0
    for question in np.unique(candidates.question[translated]):
        for number in np.unique(candidates.path[translated & (candidates.question == question)]):
            rows = np.where((candidates.question == question) & (candidates.path == number))[0][:10]
            hits = np.where(candidates.labels[rows] > 0)[0]
            found.setdefault(str(candidates.path_lang[rows[0]]), []).append(1.0 / (hits[0] + 1) if len(hits) else 0.0)
    return {lang: round(float(np.mean(v)), 4) for lang, v in sorted(found.items())}


def reliability_report(model: RelevanceModel, test: dict[str, Candidates]) -> None:
    """Predicted P(relevant) against the observed rate, per decile of prediction, per path type."""
    pooled = Candidates.concat(list(test.values()))
    scores = model.predict(pooled.rows, pooled.path_keys())
    for origin in ("as_written", "translated", "generated"):
        mask = (column(pooled, "translated") > 0 if origin == "translated" else
                column(pooled, "generated") > 0 if origin == "generated" else
                (column(pooled, "translated") == 0) & (column(pooled, "generated") == 0))
        table(f"Reliability on test, {origin} paths ({int(mask.sum())} candidates)",
              ["decile", "candidates", "predicted", "observed", "gap"],
              [[i + 1, n, p, o, o - p] for i, (n, p, o) in enumerate(reliability(scores[mask], pooled.labels[mask]))])
    rows = []
    for layout, candidates in test.items():  # the probability a user sees first: each path's top hit
        predicted = model.predict(candidates.rows, candidates.path_keys())
        top = top_of_each_path(candidates, predicted)
        top = top[candidates.path[top] == 0]
        rows.append([layout, len(top), float(predicted[top].mean()), float(candidates.labels[top].mean())])
    table("Each as-written path's top hit on test: predicted P(relevant) against the observed rate",
          ["layout", "paths", "predicted", "observed"], rows)


def merged_mrr(model: RelevanceModel, candidates: Candidates, k: int = 10) -> np.ndarray:
    """Per question row, the reciprocal rank of its first gold passage when all its paths (as written, its
    translations, the generated one) are max-merged on the model's probabilities, as ``merge: max`` does: the
    one place the calibration decides an order. Candidates keep no passage ids, so a passage met on several
    paths is recognised by its ``length`` feature (the log of its length in characters; two different passages
    of one question's candidates of the same length are taken for one, the same way for every model)."""
    scores, length = model.predict(candidates.rows, candidates.path_keys()), column(candidates, "length")
    reciprocal = []
    for question in np.unique(candidates.question):
        best: dict[float, tuple[float, float]] = {}
        for row in np.flatnonzero(candidates.question == question):
            if scores[row] > best.get(length[row], (-1.0, 0.0))[0]:
                best[length[row]] = (scores[row], candidates.labels[row])
        ranked = sorted(best.values(), key=lambda pair: -pair[0])[:k]
        reciprocal.append(next((1.0 / (rank + 1) for rank, (_, label) in enumerate(ranked) if label > 0), 0.0))
    return np.array(reciprocal)


def merged_paths_report(before: RelevanceModel, model: RelevanceModel, sample: dict[str, Candidates]) -> None:
    """MRR@10 of every path of a question max-merged, the shipped model before against this one, with the paired
    test over questions (a question's translations flip together)."""
    rows = []
    for layout, candidates in sample.items():
        old, new = merged_mrr(before, candidates), merged_mrr(model, candidates)
        qids = [candidates.qids[question] for question in np.unique(candidates.question)]
        test = paired_test(old, new, clusters=qids)
        rows.append([layout, test["clusters"], len(old), float(old.mean()), float(new.mean()), test["delta"],
                     test["p"]])
    table("Every path of a question max-merged (as written, translated, generated), sampled test questions: MRR@10",
          ["layout", "questions", "rows", "model before", "model", "paired Δ", "p"], rows)


def leave_one_language_out(dev: dict[str, Candidates], test: dict[str, Candidates], features: tuple[str, ...]) -> None:
    """Per layout, the model judged on a question language it never saw: fitted on dev questions of every
    other language (every layout), scored on that language's test questions."""
    rows = []
    langs = sorted({lang for c in test.values() for _, lang in c.cells})
    for lang in langs:
        train = Candidates.concat([c.select([i for i, (_, asked) in zip(c.ids, c.cells) if asked != lang])
                                   for c in dev.values()])
        unseen = fit(train.rows, train.labels, train.path_keys(), {"name": f"without-{lang}", "embedder": "-"},
                     features=features)  # fitted as the shipped model is
        for layout, candidates in test.items():
            held = candidates.select([i for i, (_, asked) in zip(candidates.ids, candidates.cells) if asked == lang])
            if len(held.rows):
                rows.append([layout, lang, len(np.unique(held.question)), path_mrr(held, hybrid_order(held)),
                             path_mrr(held, unseen.predict(held.rows, held.path_keys()))])
    table("MRR@10, leave one question language out (fitted without it; its test questions), per layout",
          ["layout", "question language", "questions", "hybrid order", "model never fitted on it"], rows)


if __name__ == "__main__":
    main()
