"""How much of the language gap is the embedder's per-language offset? Shipped as the ``centered`` features
(store/language_vectors.py, shrink 5); measured here with the centroids made in other ways too.

    python benchmarks/language_centering.py            # every layout bench builds (about 4 minutes on 2 cores)
    python benchmarks/language_centering.py --layouts scattered,mixed   # fitted on these layouts' dev articles only
    python benchmarks/language_centering.py --shrink 10   # each centroid as if 10 more passages of the KB's mean

A multilingual embedder puts every text of one language near that language's centroid, so a question's cosine
to a page in its own language starts higher than to a page in another. Taking each language's centroid out of the
vectors (the mean of the KB's stored passage vectors in that language; the question minus the centroid of its
language's passages, left as it is when the KB has none) is a known way to make the embedding space less about
language (Libovický et al., 2020). The shipped relevance stage only sees the bias on each path's own candidates
(``lang_bias``, ``dense_fair``); this measures what the whole KB's centroids would add:

1. **Dense alone**: every test question as written ranked over the whole index (within its country and the
   global pages on a country KB, as the path's filter says) by the raw cosine and by the centered one (pages by
   their best version), MRR@10 split by where the gold page is.
2. **The learned stage with and without it**: the candidates the default re-scores (``+country``'s retrieval,
   as-written path), the shipped model's other features (``MODEL_FEATURES`` but the ``centered`` ones, which
   this benchmark computes itself so the centroids can be varied) fitted listwise on the dev articles with
   and without three centered features (the centered cosine, its z-score and gap to the path's best; zero on a
   path whose candidates all share its language or that has fewer than ``FEW_CANDIDATES``, as every ``:cross``
   feature), scored on test articles. Both fits see the same rows, so the difference is the features'. The p is
   a sign-flip test over questions' means (a question and its translations averaged first, as every figure).
3. **Leave one question language out**: both fits without that language's dev questions, on its test questions.
4. **A page's other versions**: the hybrid order's pages ranked by their best version, or by the mean of their
   best 2-4 versions (where a page exists in several languages, summing its versions' evidence).

Centroids are the whole index's, country KBs included (a country filter does not change them). This is a
re-ranking experiment on the as-written path only: no translated or generated paths, no calibration.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA, bench_store, need_data, table  # noqa: E402

from babelrag.config import preset_config  # noqa: E402
from babelrag.evaluate.clusters import cluster_key, cluster_means  # noqa: E402
from babelrag.evaluate.metrics import reciprocal_rank as page_reciprocal_rank  # noqa: E402
from babelrag.evaluate.significance import paired_test  # noqa: E402
from babelrag.experiments.runner import build_data, ensure_indexes  # noqa: E402
from babelrag.kb import KnowledgeBase  # noqa: E402
from babelrag.relevance.features import FEATURES, MODEL_FEATURES, feature_matrix  # noqa: E402
from babelrag.relevance.learned import query_terms  # noqa: E402
from babelrag.relevance.listwise import listwise_weights  # noqa: E402
from babelrag.retrieve.search import retrieve  # noqa: E402
from babelrag.tune.training import requests_for  # noqa: E402
from babelrag.types import Trace  # noqa: E402

# the shipped model's features but its own centered ones (``--shrink`` and ``--centroids`` vary how they are made)
MODEL_COLUMNS = [FEATURES.index(name) for name in MODEL_FEATURES if not name.startswith("centered")]
MONO_COLUMN = FEATURES.index("mono_path")


@dataclass
class Asked:
    """One question as written: its whole-index rankings' reciprocal ranks and its re-scoring candidates."""
    layout: str
    lang: str  # the question's language
    split: str
    where: str  # gold page in the question's language ("in Lq"), elsewhere, or unknown ("–")
    cluster: str
    raw_rr: float
    centered_rr: float
    pages: list[str]
    gold: set[str]
    features: np.ndarray  # MODEL_COLUMNS
    centered: np.ndarray  # the three centered features, gated
    fused: np.ndarray  # each candidate's hybrid (z-score) score


def reciprocal_rank(pages: list[str], scores: np.ndarray, gold: set[str], k: int = 10, versions: int = 1) -> float:
    """MRR@k of pages ranked by their best version's score (``versions``: by the mean of their best that many
    versions, a page found in fewer counting its missing ones as the path's lowest score)."""
    found: dict[str, list[float]] = defaultdict(list)
    for page, score in zip(pages, scores):
        found[page].append(float(score))
    floor = float(np.min(scores)) if len(scores) else 0.0
    best = {page: float(np.mean((sorted(values, reverse=True) + [floor] * versions)[:versions]))
            for page, values in found.items()}
    return page_reciprocal_rank(sorted(best, key=best.__getitem__, reverse=True)[:k], list(gold))


def unit(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1: a cosine is then a dot product."""
    return vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)


def centroids(vectors: np.ndarray, langs: np.ndarray, shrink: float) -> dict[str, np.ndarray]:
    """Each language's mean vector, pulled toward the KB's mean as if ``shrink`` more passages of the KB's mean were
    in it: a language with a single passage would otherwise be centered to nothing."""
    overall = vectors.mean(axis=0)
    return {lang: (vectors[langs == lang].sum(axis=0) + shrink * overall) / (np.sum(langs == lang) + shrink)
            for lang in set(langs)}


def collect(layouts: set[str], shrink: float, source: str) -> list[Asked]:
    """Every question of these layouts as written, per index: the KB's language centroids from its stored passage
    vectors, then the question ranked over the index and its re-scoring candidates with their features (``source``:
    the features' centroids from the whole KB, or from each path's own candidates only)."""
    store = bench_store()
    data = build_data(DATA, Path(tempfile.mkdtemp()), quick=False, seed=13)
    ensure_indexes(data.indexes, store)
    config = preset_config("+country")
    label = {q.id: "pooled" if q.kb == "pooled" else q.tags.get("layout", "") for q in data.golden}
    chosen = [q for q in data.golden if label[q.id] in layouts]
    asked: list[Asked] = []
    for index in sorted({q.index for q in chosen}):
        with KnowledgeBase.open(index, store) as kb:
            points = list(kb.collection.points())
            raw = np.vstack([point.dense for point in points])
            langs = np.array([point.passage.lang for point in points])
            centroid = centroids(raw, langs, shrink)
            centered = unit(raw - np.vstack([centroid[lang] for lang in langs]))
            row_of = {point.passage.id: row for row, point in enumerate(points)}
            pages = np.array([point.passage.doc_id for point in points])
            for question in (q for q in chosen if q.index == index):
                vector = kb.query_vector(question.question)
                shifted = unit(vector - centroid.get(question.lang, 0.0))
                gold = set(question.gold_pages)
                request = requests_for(question, kb, config, [], False, False)[0]
                hits = retrieve(kb, request, config, Trace(), rescoring=True).hits
                if not hits:  # as training skips them: nothing to rank
                    continue
                country = request.filter.country
                allowed = np.array([not country or point.passage.country == country or point.passage.scope == "global"
                                    for point in points])
                matrix = feature_matrix(hits, request, query_terms(request.text, request))
                rows = [row_of[hit.passage.id] for hit in hits]
                if source == "kb":
                    cosines = centered[rows] @ shifted
                else:  # what a search could do without keeping anything with the KB
                    own = centroids(raw[rows], langs[rows], shrink)
                    cosines = unit(raw[rows] - np.vstack([own[lang] for lang in langs[rows]])) @ unit(
                        vector - own.get(question.lang, 0.0))
                cross = 1.0 - matrix[:, MONO_COLUMN]
                spread = cosines.std()
                z = (cosines - cosines.mean()) / spread if spread > 1e-9 else np.zeros(len(cosines))
                gated = np.stack([cosines, z, cosines - cosines.max()], axis=1) * cross[:, None]
                inside = question.tags.get("gold_in_question_lang")
                asked.append(Asked(
                    label[question.id], question.lang, question.tags.get("split", ""),
                    {"true": "in Lq", "false": "elsewhere"}.get(inside or "", "–"), cluster_key(question.model_dump()),
                    reciprocal_rank(list(pages[allowed]), raw[allowed] @ vector, gold),
                    reciprocal_rank(list(pages[allowed]), centered[allowed] @ shifted, gold),
                    [hit.passage.doc_id for hit in hits], gold, matrix[:, MODEL_COLUMNS], gated,
                    np.array([hit.score for hit in hits])))
            print(f"{index}: {len(points)} passages, {sum(q.index == index for q in chosen)} questions", flush=True)
    return asked


def fitted_scores(asked: list[Asked], test: list[Asked], with_centered: bool) -> list[float]:
    """Each of ``test``'s MRR@10, in its order, under weights fitted listwise on ``asked``'s dev questions."""
    def rows(question: Asked) -> np.ndarray:
        return np.hstack([question.features, question.centered]) if with_centered else question.features
    dev = [q for q in asked if q.split == "dev"]
    matrix = np.vstack([rows(q) for q in dev])
    labels = np.concatenate([[float(page in q.gold) for page in q.pages] for q in dev])
    paths = np.concatenate([np.full(len(q.pages), number) for number, q in enumerate(dev)])
    mean, scale = matrix.mean(axis=0), matrix.std(axis=0)
    scale[scale == 0] = 1.0
    weights = listwise_weights((matrix - mean) / scale, labels, paths, 1.0)
    return [reciprocal_rank(q.pages, ((rows(q) - mean) / scale) @ weights, q.gold) for q in test]


def by_question(values: list[float], clusters: list[str]) -> float:
    """The mean over questions, a question's translations averaged first."""
    return float(cluster_means(values, clusters).mean()) if values else float("nan")


def versions_report(test: list[Asked]) -> None:
    """Where a page exists in several languages: does the evidence of its other versions rank pages better than
    its best version alone? The hybrid order's pages by their best version against the mean of their best 2-4."""
    rows = []
    for layout in sorted({q.layout for q in test} & {"parallel", "pooled"}):  # the layouts with language versions
        picked = [q for q in test if q.layout == layout]
        clusters = [q.cluster for q in picked]
        gold_found = by_question([float(bool(q.gold & set(q.pages))) for q in picked], clusters)
        tops = [q.pages[int(np.argmax(q.fused))] for q in picked]
        wrong = [(top, q) for top, q in zip(tops, picked) if top not in q.gold]
        same_article = sum(any(top.split("#")[0] == page.split("#")[0] for page in q.gold) for top, q in wrong)
        rows.append([layout, len(set(clusters)), gold_found, f"{same_article} of {len(wrong)}", *(by_question(
            [reciprocal_rank(q.pages, q.fused, q.gold, versions=versions) for q in picked], clusters)
            for versions in (1, 2, 3, 4))])
    table("MRR@10 on test articles, the hybrid order's candidates: a page by its best version or the mean of its "
          "best N", ["layout", "n", "gold among candidates", "wrong top page from the gold's article",
                     "best version", "best 2", "best 3", "best 4"], rows)


def leave_one_language_out(asked: list[Asked], test: list[Asked]) -> None:
    """Both fits without any dev question in a language, scored on that language's test questions (every layout
    measured together): whether the centered features help in a language the weights never saw asked."""
    rows = []
    for lang in sorted({q.lang for q in test}):
        held_out = [q for q in asked if q.lang != lang]
        mine = [q for q in test if q.lang == lang]
        clusters = [q.cluster for q in mine]
        before = cluster_means(fitted_scores(held_out, mine, False), clusters)
        after = cluster_means(fitted_scores(held_out, mine, True), clusters)
        tested = paired_test(before, after)
        rows.append([lang, len(before), float(before.mean()), float(after.mean()), tested["delta"], tested["p"]])
    table("Leave one question language out (fitted without that language's dev questions), MRR@10 on its test "
          "questions", ["language", "n", "learned", "+ centered", "Δ", "p"], rows)


def main() -> None:
    """Collect, fit both ways, and print both tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layouts", default="scattered,unique-country,mixed,parallel,pooled,monolingual",
                        help="layouts to measure and fit on, comma-separated (parallel: the country KBs; pooled: the "
                             "parallel layout's pooled KB)")
    parser.add_argument("--centroids", choices=["kb", "candidates"], default="kb",
                        help="where the centered features' centroids come from: the KB's passages, or each path's own "
                             "candidates (the whole-index dense figures always use the KB's)")
    parser.add_argument("--shrink", type=float, default=0.0,
                        help="pull each language's centroid toward the KB's mean as if this many more passages of the "
                             "mean were in that language (0: the language's own mean)")
    args = parser.parse_args()
    need_data()
    asked = collect(set(args.layouts.split(",")), args.shrink, args.centroids)
    test = [q for q in asked if q.split == "test"]
    without, with_centered = fitted_scores(asked, test, False), fitted_scores(asked, test, True)
    rows = []
    for layout in sorted({q.layout for q in test}):
        for where in ("all", "in Lq", "elsewhere"):
            picked = [i for i, q in enumerate(test) if q.layout == layout and where in ("all", q.where)]
            if not picked:
                continue
            clusters = [test[i].cluster for i in picked]
            before = cluster_means([without[i] for i in picked], clusters)
            after = cluster_means([with_centered[i] for i in picked], clusters)
            tested = paired_test(before, after)  # over questions: the p of the printed difference
            rows.append([layout, where, len(before),
                         by_question([test[i].raw_rr for i in picked], clusters),
                         by_question([test[i].centered_rr for i in picked], clusters),
                         float(before.mean()), float(after.mean()), tested["delta"], tested["p"]])
    versions_report(test)
    leave_one_language_out(asked, test)
    table("MRR@10 on test articles (n = questions): dense over the whole index, raw and language-centered; "
          "the learned stage fitted on dev without and with centered features",
          ["layout", "gold", "n", "dense", "dense centered", "learned", "+ centered", "Δ", "p"], rows)


if __name__ == "__main__":
    main()
