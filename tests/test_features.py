"""The learned stage's per-language and per-page features, on a path whose numbers can be worked by hand."""
from __future__ import annotations

import math
from array import array

import numpy as np
import pytest

from babelrag.relevance.features import FEATURES, HYBRID_PRESET, feature_matrix
from babelrag.types import Hit, Passage, SearchRequest

# (language, page, cosine): page a in en (two chunks) and de, page b in en and sv, page c in de and en
CANDIDATES = [("en", "a", 0.80), ("de", "a", 0.70), ("en", "b", 0.60), ("sv", "b", 0.50), ("de", "c", 0.40),
              ("en", "c", 0.30), ("en", "a", 0.35)]


def _columns(candidates: list[tuple[str, str, float]]) -> dict[str, np.ndarray]:
    hits = [Hit(Passage(f"{page}-{lang}-{n}", "text", page, lang), cosine, "as_written", frozenset(),
                {"cosine": cosine, "centered": cosine}) for n, (lang, page, cosine) in enumerate(candidates)]
    rows = feature_matrix(hits, SearchRequest("question", "kb", "de"), frozenset())
    return {name: rows[:, FEATURES.index(name)] for name in FEATURES}


@pytest.fixture(scope="module")
def columns() -> dict[str, np.ndarray]:
    return _columns(CANDIDATES)


def test_each_candidate_is_placed_among_its_own_language(columns) -> None:
    assert columns["cand_lang_share"] == pytest.approx([4 / 7, 2 / 7, 4 / 7, 1 / 7, 2 / 7, 4 / 7, 4 / 7])
    assert columns["dense_lang_gap"] == pytest.approx([0, 0, -0.2, 0, -0.3, -0.5, -0.45])
    assert columns["lang_rank"] == pytest.approx(np.log([1, 1, 2, 1, 2, 4, 3]))
    english = np.array([0.8, 0.6, 0.3, 0.35])
    z = (english - english.mean()) / english.std()
    assert columns["dense_lang_z"] == pytest.approx([z[0], 0, z[1], 0, 0, z[2], z[3]])  # groups under 3: 0


def test_each_candidate_carries_what_the_path_found_of_its_page(columns) -> None:
    assert columns["page_langs"] == pytest.approx(np.log([2] * 7))  # languages, not chunks
    assert columns["page_same_lang"] == pytest.approx([1, 1, 0, 0, 1, 1, 1])  # a German version was found
    assert columns["page_dense_gap"] == pytest.approx([0, 0, -0.2, -0.2, -0.4, -0.4, 0])
    assert columns["par_share"] == pytest.approx([1.0] * 7) and math.isclose(columns["same_lang_share"][0], 2 / 7)


def test_a_gated_copy_is_its_feature_on_a_cross_lingual_path_of_ten_or_more(columns) -> None:
    """Under ten candidates a path is ranked as a monolingual one: every gated copy is 0."""
    assert columns["mono_path"].all() and not columns["dense_lang_z:cross"].any()
    longer = _columns(CANDIDATES + [(lang, f"{page}2", cosine - 0.01) for lang, page, cosine in CANDIDATES])
    assert not longer["mono_path"].any()
    for name in ("dense_lang_z", "page_langs", "hybrid", "coverage:other_lang"):
        assert np.array_equal(longer[f"{name}:cross"], longer[name])


def test_coverage_is_the_share_of_query_terms_a_candidate_holds_whatever_form_its_terms_take() -> None:
    """The stores give 4-byte id arrays (matched in one pass); a set, a list with repeats, or no terms read the same."""
    forms = [array("I", [9, 3, 5]), frozenset({3, 5, 9}), [5, 5, 3, 9, 9], None, array("I"), array("I", [7])]
    hits = [Hit(Passage(f"p{n}", "text", f"p{n}", "en"), 0.5, "as_written", terms, {"cosine": 0.5 - n / 100, "centered": 0.1})
            for n, terms in enumerate(forms)]
    rows = feature_matrix(hits, SearchRequest("question", "kb", "en"), frozenset({3, 5, 7, 11}))
    assert rows[:, FEATURES.index("coverage")] == pytest.approx([0.5, 0.5, 0.5, 0.0, 0.0, 0.25])


def test_a_candidate_without_its_cosine_is_a_bug_upstream_not_a_cosine_of_zero() -> None:
    hits = [Hit(Passage(f"p{n}", "text", f"p{n}", "en"), 0.5, "as_written", None, signals)
            for n, signals in enumerate([{"cosine": 0.4, "centered": 0.1, "bm25": 2.0}, {"bm25": 3.0, "bm25_rank": 1}])]
    with pytest.raises(ValueError, match="without its cosine"):
        feature_matrix(hits, SearchRequest("question", "kb", "en"), frozenset({3}))
    rows = feature_matrix(hits[:1], SearchRequest("question", "kb", "en"), frozenset({3}))
    assert rows[0, FEATURES.index("bm25_rank")] == pytest.approx(np.log(2))  # not returned: past every candidate


def test_path_z_scores_are_over_every_candidate_with_the_population_spread(columns) -> None:
    """The shipped model was fitted on these: z over the path's candidates, ``std`` with ddof 0 (not the sample's),
    and the language-bias-corrected cosine's own; a path whose candidates all score the same gets 0."""
    dense = np.array([cosine for _, _, cosine in CANDIDATES])
    assert columns["dense_z"] == pytest.approx((dense - dense.mean()) / dense.std(), abs=1e-12)
    german = np.array([lang == "de" for lang, _, _ in CANDIDATES], dtype=float)
    fair = dense - (dense[german > 0].mean() - dense[german == 0].mean()) * german
    assert columns["dense_fair_z"] == pytest.approx((fair - fair.mean()) / fair.std(), abs=1e-12)
    assert not _columns([("en", "a", 0.5), ("de", "b", 0.5)])["dense_z"].any()
    bm25 = np.array([0.0, 2.0, 0.0, 5.0, 1.0])
    hits = [Hit(Passage(f"p{n}", "text", f"p{n}", "en"), 0.5, "as_written", None,
                {"cosine": 0.5 - n / 100, "centered": 0.1, "bm25": score}) for n, score in enumerate(bm25)]
    rows = feature_matrix(hits, SearchRequest("question", "kb", "en"), frozenset())
    assert rows[:, FEATURES.index("bm25_z")] == pytest.approx((bm25 - bm25.mean()) / bm25.std(), abs=1e-12)


def _fused(method: str, keyword_weight: float, lang: str = "sv") -> list[Hit]:
    """A path's two arms fused as retrieval fuses them: four dense hits, three keyword hits, two in both; ``k2`` is
    keyword-only, its own cosine (0.10) far below the dense arm's lowest (0.55)."""
    from babelrag.retrieve.fusion import Arm, fuse_arms
    from babelrag.store.schema import Scored

    passage = {pid: Passage(pid, "text", pid, lang) for pid in ("d1", "d2", "d3", "d4", "k2")}
    dense = [Scored(passage[pid], cosine) for pid, cosine in (("d1", 0.80), ("d2", 0.70), ("d3", 0.60), ("d4", 0.55))]
    keyword = [Scored(passage[pid], bm25, array("I", [7])) for pid, bm25 in (("d3", 9.0), ("k2", 6.0), ("d4", 1.0))]
    cosines = {"d1": 0.80, "d2": 0.70, "d3": 0.60, "d4": 0.55, "k2": 0.10}
    rescored = {pid: {"cosine": cosine, "centered": cosine} for pid, cosine in cosines.items()}
    ranking = fuse_arms([Arm("p/dense", "dense", dense, range(1, 5)), Arm("p/bm25", "bm25", keyword, range(1, 4))],
                        method, "p", rescored, weights=[1.0, keyword_weight], complete=[False, True])
    return list(ranking.hits)


def test_a_monolingual_path_is_ordered_by_the_hybrid_presets_own_fusion_total() -> None:
    """``hybrid:mono_path`` is the hybrid preset's z-score fusion total (keyword weight 0.5), whatever this search's
    fusion method or keyword weight; the plain ``hybrid`` feature stays recomputed from the cosines (a keyword-only
    candidate at its own cosine). A path re-scored against another text, or whose arms were not fused, gets the
    recomputed order; fused candidates that do not all carry their arms' z-scores are a bug; a cross-lingual path's
    column is 0."""
    request = SearchRequest("fråga", "kb", "sv")
    preset = _fused("zscore", 0.5)
    rows = feature_matrix(preset, request, frozenset())
    totals = [h.score for h in preset]
    assert rows[:, FEATURES.index("hybrid:mono_path")] == pytest.approx(totals)
    assert not np.allclose(rows[:, FEATURES.index("hybrid")], totals)  # k2 at its own cosine there
    for method, weight in (("zscore", 1.0), ("rrf", 1.0), ("max", 0.0)):
        other = _fused(method, weight)
        by_id = {h.passage.id: row for h, row in zip(other, feature_matrix(other, request, frozenset()))}
        assert [by_id[h.passage.id][FEATURES.index("hybrid:mono_path")] for h in preset] == pytest.approx(totals)
    rescored = feature_matrix(preset, SearchRequest("fråga", "kb", "sv", rerank_text="en annan text"), frozenset())
    assert rescored[:, FEATURES.index("hybrid:mono_path")] == pytest.approx(rescored[:, FEATURES.index("hybrid")])
    unfused = [Hit(h.passage, h.score, h.path, h.terms, {k: v for k, v in h.signals.items() if "fusion_z" not in k})
               for h in preset]
    plain = feature_matrix(unfused, request, frozenset())
    assert plain[:, FEATURES.index("hybrid:mono_path")] == pytest.approx(plain[:, FEATURES.index("hybrid")])
    with pytest.raises(ValueError, match="arms' z-scores"):
        feature_matrix(unfused[:2] + preset[2:], request, frozenset())
    mixed = [Hit(Passage(f"q{n}", "text", f"q{n}", "sv" if n % 2 else "en"), 0.5, "as_written", None,
                 {"cosine": 0.5 - n / 100, "centered": 0.1, "dense_fusion_z": float(n)}) for n in range(12)]
    cross = feature_matrix(mixed, request, frozenset())
    assert not cross[:, FEATURES.index("hybrid:mono_path")].any()
    # tune's one-feature variant reads the preset's order on every path, cross-lingual ones included
    assert rows[:, FEATURES.index(HYBRID_PRESET)] == pytest.approx(totals)
    assert cross[:, FEATURES.index(HYBRID_PRESET)] == pytest.approx(np.arange(12.0))
    assert plain[:, FEATURES.index(HYBRID_PRESET)] == pytest.approx(plain[:, FEATURES.index("hybrid")])
