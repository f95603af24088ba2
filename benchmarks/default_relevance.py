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
from babelrag.kb import KnowledgeBase  # noqa: E402
from babelrag.relevance.features import FEATURES, KEYWORD_WEIGHT  # noqa: E402
from babelrag.relevance.model import default_model, fit  # noqa: E402
from babelrag.tune.fitting import cross_validate, path_mrr  # noqa: E402
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
    config = preset_config("hybrid")
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
        model = fit(rows, labels, {
            "name": "default", "embedder": fingerprint, "variant": "full",
            "trained_on": f"the shipped data's dev split ({questions} questions: xquad-dev cells and pooled, "
                          f"swefaq-dev); XQuAD is CC BY-SA 4.0, SweFAQ CC BY 4.0", "questions": questions})
        TARGET.write_text(json.dumps(model.to_dict(), indent=1) + "\n", encoding="utf-8")
        print(f"written {TARGET}")
    cv = {index: cross_validate(c) for index, c in dev.items()}
    table("MRR@10 of the question-as-written path, test questions (the model never saw them)",
          ["index", "questions", "hybrid order", "shipped model", "Δ", "CV on dev: full", "CV on dev: hybrid"],
          [[index, len(c.ids), path_mrr(c, hybrid_order(c)), path_mrr(c, model.predict(c.rows)),
            f"{path_mrr(c, model.predict(c.rows)) - path_mrr(c, hybrid_order(c)):+.3f}", cv[index]["full"],
            cv[index]["hybrid"]] for index, c in test.items()])
    print("weights (per standard deviation):", model.weights())


if __name__ == "__main__":
    main()
