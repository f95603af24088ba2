"""Fit the relevance model the package ships (``src/babelrag/relevance/default_model.json``), and say how
good it is: on the shipped data's dev questions only (xquad-dev cells and pooled, swefaq-dev; the split
is a hash of the XQuAD question id, the same in every build), scored on the test questions.

    python benchmarks/default_relevance.py            # fit, report, write the model
    python benchmarks/default_relevance.py --check    # report the shipped model only

The shipped model always uses every feature (a KB without a golden set may well be cross-lingual);
``babelrag tune`` chooses a KB's own variant by cross-validation. Timing is not measured here.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA, ROOT, bench_store, need_data, table  # noqa: E402

from babelrag.bench.runner import build_data, ensure_indexes  # noqa: E402
from babelrag.config import preset_config  # noqa: E402
from babelrag.evaluate.calibrate import written  # noqa: E402
from babelrag.kb import KnowledgeBase  # noqa: E402
from babelrag.relevance.features import FEATURES, KEYWORD_WEIGHT  # noqa: E402
from babelrag.relevance.model import default_model, fit, question_hash  # noqa: E402
from babelrag.tune.fitting import cross_validate, out_of_fold_tau, path_mrr  # noqa: E402
from babelrag.tune.training import Candidates, collect  # noqa: E402

TARGET = ROOT / "src" / "babelrag" / "relevance" / "default_model.json"


def hybrid_order(candidates: Candidates) -> np.ndarray:
    """The zscore fusion every hybrid search uses: what the model must beat."""
    rows = candidates.rows
    return rows[:, FEATURES.index("dense_z")] + KEYWORD_WEIGHT * rows[:, FEATURES.index("bm25_z")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="report the shipped model, write nothing")
    args = parser.parse_args()
    need_data()
    store = bench_store()
    data = build_data(DATA, Path(tempfile.mkdtemp()), quick=False, seed=13)
    ensure_indexes(data.indexes, store)
    config = preset_config("+country")  # candidates as the reranked presets retrieve them (country filter on)
    dev, test = {}, {}
    for index in sorted(data.indexes):
        questions = [q for q in data.golden if q.index == index]
        with KnowledgeBase.open(index, store) as kb:
            fingerprint = kb.embedder.fingerprint()
            for split, into in (("dev", dev), ("test", test)):
                chosen = [q for q in questions if q.tags.get("split") == split]
                into[index] = collect(kb, chosen, config, golden=chosen)
    if args.check:
        model = default_model()
    else:
        rows = np.vstack([c.rows for c in dev.values()])
        labels = np.concatenate([c.labels for c in dev.values()])
        questions = sum(len(c.ids) for c in dev.values())
        texts = sorted({question_hash(q.question) for q in data.golden if q.tags.get("split") == "dev"})
        # `threshold: auto`: calibrated on cross-fitted scores (each dev question scored by a model fitted
        # without it), pooled over the indexes; the model itself is fitted on all dev questions
        parts = list(dev.values())
        pooled = Candidates(np.vstack([c.rows for c in parts]), np.concatenate([c.labels for c in parts]),
                            np.concatenate([c.question + 10 ** 6 * i for i, c in enumerate(parts)]),
                            np.concatenate([c.path for c in parts]), np.concatenate([c.path_lang for c in parts]),
                            [], [])
        tau = out_of_fold_tau(pooled, FEATURES)
        model = fit(rows, labels, {
            "name": "default", "embedder": fingerprint, "variant": "full",
            "trained_on": f"the shipped data's dev split ({questions} questions: xquad-dev cells and pooled, "
                          f"swefaq-dev); XQuAD is CC BY-SA 4.0, SweFAQ CC BY 4.0", "questions": questions,
            "question_hashes": texts,  # `babelrag tune` leaves the shipped model out of CV on these
            "threshold": None if tau is None else written(tau)})
        TARGET.write_text(json.dumps(model.to_dict(), indent=1) + "\n", encoding="utf-8")
        print(f"written {TARGET}")
    cv = {index: cross_validate(c) for index, c in dev.items()}
    table("MRR@10 of the question-as-written path, test questions (the model never saw them)",
          ["index", "questions", "hybrid order", "shipped model", "Δ", "CV on dev: full", "CV on dev: hybrid"],
          [[index, len(c.ids), path_mrr(c, hybrid_order(c)), path_mrr(c, model.predict(c.rows)),
            f"{path_mrr(c, model.predict(c.rows)) - path_mrr(c, hybrid_order(c)):+.3f}", cv[index]["full"],
            cv[index]["hybrid"]] for index, c in test.items()])
    print("weights (per standard deviation):", model.weights())
    leave_one_language_out(dev, test, model)


def _asked_in(candidates: Candidates, lang: str, keep: bool) -> Candidates:
    return candidates.select([qid for qid, (_, asked) in zip(candidates.ids, candidates.cells) if (asked == lang) == keep])


def _mrr(parts: list[Candidates], scores) -> float:  # noqa: ANN001 - scores: Candidates -> array
    """Question-weighted MRR@10 over several indexes' candidates."""
    sizes = [len(set(p.question.tolist())) for p in parts]
    return sum(path_mrr(p, scores(p)) * n for p, n in zip(parts, sizes) if n) / max(sum(sizes), 1)


def leave_one_language_out(dev: dict[str, Candidates], test: dict[str, Candidates], shipped) -> None:  # noqa: ANN001
    """The model judged on a question language it never saw: fitted on dev questions of every other
    language, scored on that language's test questions (every index)."""
    langs = sorted({lang for c in test.values() for _, lang in c.cells})
    rows = []
    for lang in langs:
        train = [_asked_in(c, lang, keep=False) for c in dev.values()]
        held = [_asked_in(c, lang, keep=True) for c in test.values()]
        unseen = fit(np.vstack([t.rows for t in train]), np.concatenate([t.labels for t in train]),
                     {"name": f"without-{lang}", "embedder": "-"})
        rows.append([lang, sum(len(set(h.question.tolist())) for h in held), _mrr(held, hybrid_order),
                     _mrr(held, lambda c: unseen.predict(c.rows)), _mrr(held, lambda c: shipped.predict(c.rows))])
    table("MRR@10, leave one question language out (fitted without it; its test questions)",
          ["question language", "questions", "hybrid order", "model never fitted on it", "shipped model"], rows)


if __name__ == "__main__":
    main()
