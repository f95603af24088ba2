"""What the learned relevance model reads about one candidate of one path: signals both retrieval arms
already produced, put on scales that mean the same on every path and in every language.

Raw cosines and BM25 totals shift with the query's language and length, so next to them each path's
candidates are also described relative to each other (the gap to the best cosine, z-scores, ranks,
BM25 over the path's best). Nothing here calls a model: the dense cosine is the one retrieval computed
(the engine's, against the path's re-scoring text), coverage reads the passage's stored keyword terms.
"""
from __future__ import annotations

from array import array
from collections.abc import Sequence

import numpy as np

from babelrag.lang.languages import script_of
from babelrag.store.schema import DENSE, SPARSE
from babelrag.types import Hit, SearchRequest, fusion_z_signal

FEATURES: tuple[str, ...] = (
    "dense", "dense_gap", "dense_z", "dense_rank", "bm25_log", "bm25_norm", "bm25_z", "bm25_hit", "bm25_rank",
    "coverage", "query_terms", "same_lang", "same_script", "translated", "generated", "length",
    "bm25_norm:same_script", "coverage:same_script", "dense_gap:same_lang",
    "hybrid",
    # the embedder's language bias, measured on the path's own candidates and taken out of the cosine
    "lang_bias", "dense_fair", "dense_fair_gap", "dense_fair_z", "same_lang_share",
    "bm25_norm:other_lang", "coverage:other_lang", "dense_fair_gap:same_lang",
    # each candidate against the candidates in its own language: a page in a language the path rarely
    # retrieves stands out among its peers even when the language bias keeps its raw cosine low
    "dense_lang_z", "dense_lang_gap", "lang_rank", "cand_lang_share",
    "bm25_z:same_lang_share", "coverage:same_lang_share", "dense_lang_z:other_lang",
    # the page behind the candidate: its other language versions the path also found lend it their evidence
    # (a parallel KB), and a path whose candidates all share its language is keyword territory (monolingual)
    "page_langs", "page_same_lang", "page_dense_gap", "page_bm25_norm", "mono_path", "hybrid:mono_path",
    "pool_size",  # log of the path's candidates: with one gold page among them, the base rate
    # how parallel the KB looks from the path: the share of its candidates whose page it found in more than one
    # language. Where every page exists in the question's language too, the keyword arm and the same-language
    # version are evidence the cross-lingual layouts (which dominate training) teach the model to discount
    "par_share", "hybrid:par_share", "same_lang:par_share", "page_same_lang:par_share", "bm25_z:par_share",
    # the cosine with the KB's language centroids taken out of both sides (store/language_vectors.py): the
    # embedder's per-language offset measured on the whole KB rather than on the path's own candidates
    "centered", "centered_gap", "centered_z",
)
KEYWORD_WEIGHT = 0.5  # the ``hybrid`` feature: zscore fusion's own combination of the two arms
FUSION_Z = (fusion_z_signal(DENSE), fusion_z_signal(SPARSE))
# Gated copies (``name:cross``: the feature on a path whose candidates are not all in its language, else 0).
# A path whose candidates all share its language — a monolingual KB — has no language evidence to weigh,
# and the keyword arm means there what it means in a monolingual engine; gating gives such paths their own
# two weights (``mono_path``, ``hybrid:mono_path``: the calibrated hybrid order, the hybrid preset's own z-score
# fusion total where the path's arms were fused) instead of letting the
# cross-lingual layouts, which dominate training, decide how much a Swedish FAQ's keywords count.
# A path with fewer than ``FEW_CANDIDATES`` candidates is treated the same way: its language bias and
# per-language peers cannot be measured on a handful of candidates (each is the best of its language), and
# the cross-lingual weights, fitted on pools of about 60, would let a Polish page outrank the Swedish one a
# Swedish question names (measured on a four-passage KB); the calibrated hybrid order ranks such paths.
FEW_CANDIDATES = 10
MONO = ("mono_path", "hybrid:mono_path")
GATED = tuple(f"{name}:cross" for name in FEATURES if name not in MONO)
# which kind of path the row comes from, constant over a path so it never orders one (model.py ``path_kinds``): the
# question over the KB's pivot-language copies (ingest/pivot_copies.py), ranked by weights of their own
# (relevance/learn.py)
PIVOT_COPY = "pivot_copy"
# the hybrid preset's own order on every path (its z-score fusion total where the path's arms were fused, else
# recomputed): ``tune``'s one-feature variant, the calibrated hybrid order, so that on a monolingual KB it keeps
# the order the preset and the shipped model give there
HYBRID_PRESET = "hybrid_preset"
_UNGATED = FEATURES
_GATED_FROM = [_UNGATED.index(name[:-len(":cross")]) for name in GATED]  # the column each gated copy gates
FEATURES = FEATURES + GATED + (PIVOT_COPY, HYBRID_PRESET)
MODEL_FEATURES: tuple[str, ...] = GATED + MONO  # what the shipped model and `tune`'s full variant read


def _group_max(groups: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    best = np.full(size, -np.inf)
    np.maximum.at(best, groups, values)
    return best


def _codes(values: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """Each value's group number, in order of first appearance (``np.unique`` sorts Python strings: slower),
    and the distinct values in that order."""
    numbers: dict[str, int] = {}
    codes = np.array([numbers.setdefault(value, len(numbers)) for value in values], dtype=np.intp)
    return codes, list(numbers)


def _within_language(dense: np.ndarray, group: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per candidate, against the candidates in the same language (``group``: each one's language as a
    number): z-score of the cosine (0 in groups of fewer than 3), gap to the group's best, log rank in the
    group, and the group's share of the path."""
    count = np.bincount(group).astype(float)
    mean = np.bincount(group, weights=dense) / count
    std = np.sqrt(np.maximum(np.bincount(group, weights=dense * dense) / count - mean * mean, 0.0))
    spread = std[group]
    z = np.where((count[group] >= 3) & (spread > 1e-9), (dense - mean[group]) / np.where(spread > 1e-9, spread, 1.0), 0.0)
    gap = dense - _group_max(group, dense, len(count))[group]
    order = np.lexsort((-dense, group))  # by group, best first
    starts = np.searchsorted(group[order], np.arange(len(count)))
    rank = np.empty(len(dense))
    rank[order] = np.arange(len(dense)) - starts[group[order]] + 1
    return z, gap, np.log(rank), count[group] / len(dense)


def _by_page(page: np.ndarray, lang_group: np.ndarray, languages: int, same_lang: np.ndarray, dense: np.ndarray,
             bm25_norm: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per candidate, about its page among the path's candidates (``page``: each one's page as a number): log of
    how many languages the path found it in (on a parallel KB a relevant page is found in several), whether one
    of them is the path's language, the page's best cosine relative to the path's best, and its best normalised
    BM25."""
    pages = int(page.max()) + 1
    found = np.zeros((pages, languages), dtype=bool)
    found[page, lang_group] = True  # each (page, language) once
    return (np.log(found.sum(axis=1))[page], _group_max(page, same_lang, pages)[page],
            _group_max(page, dense, pages)[page] - dense.max(), _group_max(page, bm25_norm, pages)[page])


def _standardised(values: np.ndarray) -> np.ndarray:
    """z-scores over the path's candidates (0 when their spread is exactly 0), by ``mean()`` and ``std()``'s arithmetic
    (the same floats) without their per-call overhead (about 3 and 6 µs): this runs three times a path."""
    mean = values.sum() / len(values)
    centred = values - mean
    std = np.sqrt((centred * centred).sum() / len(values))
    return centred / std if std > 0 else np.zeros(len(values))


def _language_bias(dense: np.ndarray, same_lang: np.ndarray) -> float:
    """How much higher the path's same-language candidates score than the others, on average: a multilingual
    embedder rates text in the query's language closer whatever it says, so on a KB whose pages each exist in
    one language that bias alone lifts same-language distractors over a cross-lingual gold page."""
    same = same_lang > 0
    if same.all() or not same.any():
        return 0.0
    return float(dense[same].sum() / same.sum() - dense[~same].sum() / (~same).sum())


_NO_TERMS = array("I")


def _coverage(hits: Sequence[Hit], query_terms: frozenset[int]) -> np.ndarray:
    """The share of the query's terms each candidate's keyword terms hold (0 without terms), for every candidate
    at once: their term ids side by side, matched against the query's in one pass."""
    if not query_terms or not hits:
        return np.zeros(len(hits))
    # the stores' terms are 4-byte ids, each once; anything else (a set, a list) is made so here, and a dense-only
    # candidate (no terms, about 40% of a hybrid path's) shares one empty array
    held = [_NO_TERMS if h.terms is None else h.terms if isinstance(h.terms, array) and h.terms.typecode == "I"
            else array("I", sorted(set(h.terms))) for h in hits]
    ends = np.cumsum([len(terms) for terms in held])
    matched = np.concatenate(([0], np.cumsum(np.isin(np.frombuffer(b"".join(held), dtype=np.uintc),
                                                     np.fromiter(query_terms, np.uintc, len(query_terms))))))
    return (matched[ends] - matched[np.concatenate(([0], ends[:-1]))]) / len(query_terms)


def _hybrid_preset_order(dense_z: np.ndarray, bm25_z: np.ndarray, request: SearchRequest) -> np.ndarray | None:
    """The hybrid preset's own z-score fusion total of a path whose arms were fused (each arm's z as fusion computed
    it: a keyword-only candidate at the dense arm's lowest cosine, the keyword z over what that arm returned), at
    the preset's keyword weight whatever this search's; an arm that found nothing adds 0, as in fusion. None for a
    path whose arms were not fused (one arm) or re-scored against another text (HyDE, unaccented: its arms searched
    that text, every other feature reads the question). Some candidates with the arms' z-scores and others without
    is a bug upstream."""
    found = [np.isfinite(z) for z in (dense_z, bm25_z)]
    if any(has.any() and not has.all() for has in found):
        raise ValueError("learned relevance: the path's fused candidates do not all carry their arms' z-scores")
    if not (found[0].any() or found[1].any()) or request.rerank_text is not None:
        return None
    return np.nan_to_num(dense_z) + KEYWORD_WEIGHT * np.nan_to_num(bm25_z)


def feature_matrix(hits: Sequence[Hit], request: SearchRequest, query_terms: frozenset[int]) -> np.ndarray:
    """One row per hit, columns in ``FEATURES`` order. Every hit carries its cosine to the path's re-scoring
    text and the centered one (retrieved with ``rescoring``): a missing one is a bug upstream, not a cosine of 0."""
    n = len(hits)
    if n == 0:
        return np.zeros((0, len(FEATURES)))
    dense_z_key, bm25_z_key = FUSION_Z  # each arm's unweighted z-score, left by fusing the path's arms
    try:  # what each candidate's signals say, read in one pass (a keyword rank past every candidate: not returned;
        # no arm z-score: the path's arms were not fused, or that arm found nothing)
        read = np.array([(s["cosine"], s["centered"], s.get("bm25", 0.0), s.get("bm25_rank", n + 1),
                          s.get(dense_z_key, np.nan), s.get(bm25_z_key, np.nan)) for s in (h.signals for h in hits)],
                        dtype=np.float64)
    except KeyError:
        raise ValueError("learned relevance: a candidate without its cosines (retrieve with rescoring)") from None
    dense, centered, bm25, bm25_rank, dense_fusion_z, bm25_fusion_z = read.T
    dense_rank = np.empty(n)
    dense_rank[np.argsort(-dense, kind="stable")] = np.arange(1, n + 1)
    coverage = _coverage(hits, query_terms)
    lang_group, langs = _codes([h.passage.lang for h in hits])
    same_lang = np.array([lang == request.lang for lang in langs], dtype=float)[lang_group]
    same_script = np.array([script_of(lang) == script_of(request.lang) for lang in langs], dtype=float)[lang_group]
    bm25_norm = bm25 / bm25.max() if bm25.max() > 0 else np.zeros(n)
    bm25_z = _standardised(bm25)  # over every candidate, 0 where the keyword arm found no query term (as zscore fusion)
    dense_z = _standardised(dense)
    dense_gap = dense - dense.max()
    bias = _language_bias(dense, same_lang)
    fair = dense - bias * same_lang
    fair_gap = fair - fair.max()
    other_lang = 1.0 - same_lang
    same_share = same_lang.sum() / n
    lang_z, lang_gap, lang_rank, cand_share = _within_language(dense, lang_group)
    page_langs, page_same, page_dense_gap, page_bm25 = _by_page(
        _codes([h.passage.doc_id for h in hits])[0], lang_group, len(langs), same_lang, dense, bm25_norm)
    mono = float(same_lang.all() or n < FEW_CANDIDATES)
    hybrid = dense_z + KEYWORD_WEIGHT * bm25_z
    preset_order = _hybrid_preset_order(dense_fusion_z, bm25_fusion_z, request)
    hybrid_order = hybrid if preset_order is None else preset_order
    parallel = float(np.count_nonzero(page_langs > 0) / n)
    columns = {
        "dense": dense, "dense_gap": dense_gap, "dense_z": dense_z,
        "dense_rank": np.log(dense_rank), "bm25_log": np.log1p(bm25), "bm25_norm": bm25_norm,
        "bm25_z": bm25_z,
        "bm25_hit": (bm25 > 0).astype(float), "bm25_rank": np.log(bm25_rank), "coverage": coverage,
        "query_terms": np.full(n, np.log1p(len(query_terms))), "same_lang": same_lang, "same_script": same_script,
        "translated": np.full(n, float(request.origin == "translated")),
        "generated": np.full(n, float(request.origin == "generated")),
        "length": np.log1p(np.array([len(h.passage.text) for h in hits], dtype=float)),
        "bm25_norm:same_script": bm25_norm * same_script, "coverage:same_script": coverage * same_script,
        "dense_gap:same_lang": dense_gap * same_lang,
        "hybrid": hybrid,
        "lang_bias": np.full(n, bias), "dense_fair": fair, "dense_fair_gap": fair_gap,
        "dense_fair_z": _standardised(fair), "same_lang_share": np.full(n, same_share),
        "bm25_norm:other_lang": bm25_norm * other_lang, "coverage:other_lang": coverage * other_lang,
        "dense_fair_gap:same_lang": fair_gap * same_lang,
        "dense_lang_z": lang_z, "dense_lang_gap": lang_gap, "lang_rank": lang_rank, "cand_lang_share": cand_share,
        "bm25_z:same_lang_share": bm25_z * same_share, "coverage:same_lang_share": coverage * same_share,
        "dense_lang_z:other_lang": lang_z * other_lang,
        "page_langs": page_langs, "page_same_lang": page_same, "page_dense_gap": page_dense_gap,
        "page_bm25_norm": page_bm25,
        "mono_path": np.full(n, mono), "hybrid:mono_path": hybrid_order * mono, "pool_size": np.full(n, np.log(n)),
        "par_share": np.full(n, parallel), "hybrid:par_share": hybrid * parallel,
        "same_lang:par_share": same_lang * parallel, "page_same_lang:par_share": page_same * parallel,
        "bm25_z:par_share": bm25_z * parallel,
        "centered": centered, "centered_gap": centered - centered.max(), "centered_z": _standardised(centered),
        PIVOT_COPY: np.full(n, float(request.index == "pivot_copies")), HYBRID_PRESET: hybrid_order,
    }
    ungated = np.array([columns[name] for name in _UNGATED]).T
    return np.hstack([ungated, ungated[:, _GATED_FROM] * (1.0 - mono), columns[PIVOT_COPY][:, None],
                      columns[HYBRID_PRESET][:, None]])
