"""Benchmark: does the relevance model keep a *clear* gold page first, whichever language it is in?

Two kinds of as-written path on the test articles of every layout, chosen by what retrieval saw, never by the model
(``tune/fitting.py: clear_paths``):

- **cross-lingual clear**: the gold page is in another language than the question, it is the path's closest
  candidate by cosine and at least 0.02 closer than every page in the question's language, and one of those has the
  path's best keyword match (a same-language distractor). Counted: how often an order puts the gold page above
  every same-language page.
- **native clear**: the gold page is in the question's language and is the path's top candidate by cosine and by
  BM25. Counted: how often an order keeps it first, and in its top three (what the model's trade of gold-in-Lq for
  gold-elsewhere must not cost).

Orders: dense, the z-score hybrid order, and each model file given (default: the shipped model). The candidates are
``default_relevance.py``'s (``--cache`` shares its pickle; without one they are collected again, ~10 minutes).
``tests/test_relevance_model.py`` asserts both on the real scattered KB.
Run: python benchmarks/clear_paths.py --cache c.pkl [--model old.json ...]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from common import table
from default_relevance import collect_all, dense_order, hybrid_order

from babelrag.relevance.model import RelevanceModel, default_model
from babelrag.tune.fitting import clear_path_rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, help="default_relevance.py's pickle of the collected candidates")
    parser.add_argument("--model", type=Path, action="append", default=[], help="a model file (repeatable)")
    args = parser.parse_args()
    models = {"shipped": default_model()} if not args.model else {
        path.name: RelevanceModel.from_dict(json.loads(path.read_text(encoding="utf-8"))) for path in args.model}
    candidates, _ = collect_all(args.cache)
    rows = []
    for layout, splits in sorted(candidates.items()):
        test = splits.get("test")
        if test is None:
            continue
        orders = {"dense": dense_order(test), "hybrid order": hybrid_order(test),
                  **{name: model.predict(test.rows, test.path_keys()) for name, model in models.items()}}
        rows += [[layout, name, *clear_path_rates(test, scores).values()] for name, scores in orders.items()]
    table("Clear paths on test articles (as written): the gold page above every same-language page when it is "
          "clearly closer in another language; kept first / in the top three when it is clearly best in the "
          "question's language", ["layout", "order", "cross-lingual paths", "gold above", "native paths", "first",
                                  "top three"], rows)


if __name__ == "__main__":
    main()
