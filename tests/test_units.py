"""Fast logic: chunking, BM25 weights, fusion, configuration."""
from __future__ import annotations

import math
from array import array
from dataclasses import replace

import numpy as np
import pytest

from babelrag.config import parse_overrides, preset_config
from babelrag.errors import ConfigError
from babelrag.ingest.chunking import approximate_tokens, chunk_text
from babelrag.retrieve import bm25
from babelrag.retrieve.fusion import fuse
from babelrag.types import Hit, Passage, Ranking


def words(text: str) -> int:
    return len(text.split())


def test_short_text_is_one_chunk() -> None:
    assert chunk_text("one two three", 10, words) == ["one two three"]


def test_paragraphs_are_packed_whole_under_budget() -> None:
    text = "\n\n".join(" ".join(f"p{i}w{j}" for j in range(4)) for i in range(5))
    chunks = chunk_text(text, 9, words)
    assert all(words(c) <= 9 for c in chunks)
    assert [c.count("\n\n") for c in chunks] == [1, 1, 0]
    assert " ".join(chunks).split() == text.split()


def test_long_paragraph_is_cut_at_sentences_then_words() -> None:
    sentence = " ".join(["word"] * 6) + "."
    text = " ".join([sentence] * 4) + " " + " ".join(["x"] * 25)
    chunks = chunk_text(text, 12, words)
    assert all(words(c) <= 12 for c in chunks)
    assert " ".join(chunks).split() == text.split()


def test_unspaced_text_is_cut_by_characters() -> None:
    text = "北京大学" * 50
    chunks = chunk_text(text, 40, approximate_tokens)
    assert "".join(chunks) == text and all(approximate_tokens(c) <= 40 for c in chunks)


def test_bm25_document_weights_saturate_and_normalise_length() -> None:
    short = bm25.document_vector(["a", "b"], avgdl=2.0)
    weight = dict(zip(short.indices, short.values))[bm25.term_id("a")]
    assert math.isclose(weight, 1.0)  # tf=1 at average length: (k1+1)/(1+k1)
    repeated = bm25.document_vector(["a"] * 10, avgdl=10.0)
    assert repeated.values[0] < bm25.K1 + 1  # saturates below k1 + 1
    longer = bm25.document_vector(["a"] + ["z"] * 9, avgdl=2.0)
    assert dict(zip(longer.indices, longer.values))[bm25.term_id("a")] < weight
    query = bm25.query_vector(["a", "a", "b"])
    assert dict(zip(query.indices, query.values)) == {bm25.term_id("a"): 2.0, bm25.term_id("b"): 1.0}  # BM25 sums
    assert list(query.indices) == sorted(query.indices)  # over query terms: repeated terms count again


def ranking(scorer: str, *pairs: tuple[str, float]) -> Ranking:
    return Ranking(scorer, scorer, tuple(Hit(Passage(pid, pid, pid, "en"), s, scorer) for pid, s in pairs))


def ids(r: Ranking) -> list[str]:
    return [h.passage.id for h in r.hits]


def test_a_hit_stays_frozen_and_each_gets_its_own_signals() -> None:
    """Hits are built through their slots (faster than a frozen dataclass's own __init__), and are still frozen."""
    import pickle
    from dataclasses import FrozenInstanceError

    passage = Passage("p", "text", "doc", "en")
    first, second = Hit(passage, 0.5, "path"), Hit(passage=passage, score=0.5, path="path", terms=array("I", [3]))
    with pytest.raises(FrozenInstanceError):
        first.score = 1.0  # type: ignore[misc]
    assert first.signals == {} and first.signals is not second.signals and first.terms is None
    assert first == second  # terms and signals are not compared
    moved = replace(second, score=0.7, signals={"cosine": 0.2})
    assert (moved.score, list(moved.terms), dict(moved.signals), second.score) == (0.7, [3], {"cosine": 0.2}, 0.5)
    copied = pickle.loads(pickle.dumps(moved))
    assert (copied.passage.id, copied.score, copied.path, list(copied.terms), dict(copied.signals)) == \
        ("p", 0.7, "path", [3], {"cosine": 0.2})


def test_rerank_puts_the_best_first_and_keeps_retrieval_order_among_ties() -> None:
    """Enough tied candidates that an unstable sort would reorder them (small sorts are stable by accident)."""
    from babelrag.retrieve.search import rerank
    from babelrag.types import SearchRequest, Trace

    class Halves:  # scores by position: every other candidate 0.9, the rest 0.5
        name, needs_cosines, wants_centred_candidates = "halves", False, False

        def score(self, query: str, hits: tuple[Hit, ...], request: SearchRequest) -> list[float]:
            return [0.9 if i % 2 else 0.5 for i in range(len(hits))]

    found = ranking("cosine", *[(f"p{i:02d}", 1.0 - i / 100) for i in range(64)])
    reranked = rerank(SearchRequest("q", "kb", "en"), found, Halves(), Trace())
    assert ids(reranked) == [f"p{i:02d}" for i in range(1, 64, 2)] + [f"p{i:02d}" for i in range(0, 64, 2)]
    assert [h.score for h in reranked.hits] == [0.9] * 32 + [0.5] * 32


def test_rrf_is_the_reciprocal_rank_sum() -> None:
    fused = fuse([ranking("a", ("x", 9), ("y", 8)), ranking("b", ("y", 0.9), ("z", 0.1))], "rrf", "f", rrf_k=60)
    scores = {h.passage.id: h.score for h in fused.hits}
    assert math.isclose(scores["y"], 1 / 62 + 1 / 61)
    assert math.isclose(scores["x"], 1 / 61) and ids(fused)[0] == "y"


def test_max_on_one_scale_keeps_the_best_raw_score() -> None:
    fused = fuse([ranking("cos", ("x", 0.5), ("y", 0.4)), ranking("cos", ("y", 0.9))], "max", "f")
    assert ids(fused) == ["y", "x"] and fused.hits[0].score == 0.9 and fused.scorer == "cos"


def test_max_across_scales_normalises_first() -> None:
    fused = fuse([ranking("bm25", ("x", 30.0), ("y", 10.0)), ranking("cosine", ("y", 0.9), ("z", 0.8))], "max", "f")
    assert fused.scorer == "max-minmax"
    assert {h.passage.id: h.score for h in fused.hits} == {"x": 1.0, "y": 1.0, "z": 0.0}
    assert ids(fused)[:2] == ["x", "y"]  # tie broken by best rank, then ranking order


def test_ties_go_to_the_better_rank_before_the_earlier_ranking() -> None:
    # y is 2nd in the first ranking and 1st in the second; x is 1st in the first only: both total 1.0 under max
    fused = fuse([ranking("cosine", ("x", 0.5), ("y", 0.5)), ranking("cosine", ("y", 0.5), ("z", 0.1))], "max", "f")
    assert ids(fused) == ["x", "y", "z"]  # x and y share rank 1: x's ranking comes first
    fused = fuse([ranking("cosine", ("w", 0.5), ("x", 0.5)), ranking("cosine", ("y", 0.5), ("x", 0.4))], "max", "f")
    assert ids(fused) == ["w", "y", "x"]  # y (rank 1, later ranking) before x (rank 2 at best)


def test_a_max_merge_keeps_the_hit_of_the_path_that_gave_the_best_score_and_any_keyword_terms() -> None:
    first = Ranking("a", "cosine", (Hit(Passage("p", "p", "p", "en"), 0.4, "a", array("I", [7]), {"s": 1.0}),))
    second = Ranking("b", "cosine", (Hit(Passage("p", "p", "p", "en"), 0.9, "b", None, {"s": 2.0}),))
    (hit,) = fuse([first, second], "max", "merged").hits
    assert (hit.path, hit.score, dict(hit.signals), list(hit.terms)) == ("b", 0.9, {"s": 2.0}, [7])
    (hit,) = fuse([second, Ranking("c", "cosine", (replace(first.hits[0], score=0.9, path="c"),))], "max", "m").hits
    assert hit.path == "b"  # a tie keeps the path that scored it first
    (hit,) = fuse([first, replace(second, hits=(replace(second.hits[0], terms=array("I", [8])),))], "max", "m").hits
    assert list(hit.terms) == [8]  # the winning path's own terms, when it has any


def test_zscore_standardises_over_all_candidates() -> None:
    dense = ranking("cosine", ("a", 0.90), ("b", 0.80), ("c", 0.70))
    keyword = ranking("bm25", ("c", 20.0), ("d", 2.0))
    fused = fuse([dense, keyword], "zscore", "f", complete=[False, True])
    candidates = ["a", "b", "c", "d"]
    dense_values = np.array([0.9, 0.8, 0.7, 0.7])  # d: not returned by an arm that was cut → its lowest score
    keyword_values = np.array([0.0, 0.0, 20.0, 2.0])  # a, b: no query term at all (the arm returned all it had)
    z = lambda v: (v - v.mean()) / v.std()  # noqa: E731
    expected = dict(zip(candidates, z(dense_values) + z(keyword_values)))
    assert all(math.isclose(h.score, expected[h.passage.id]) for h in fused.hits)
    assert ids(fused) == sorted(candidates, key=lambda pid: -expected[pid])


def test_a_paths_arms_fuse_as_rankings_do_and_each_candidate_keeps_every_arms_signals() -> None:
    """``fuse_arms`` (a path's arms, straight from the engine's hits) scores and orders as ``fuse`` does on the same
    rankings, under every method; each candidate keeps both arms' scores, ranks and cosine, and the fused score;
    its hit is the keyword arm's when that one carries terms; an arm's rank is the one it returned."""
    from babelrag.retrieve.fusion import Arm, fuse_arms
    from babelrag.store.schema import Scored

    passages = {pid: Passage(pid, pid, pid, "en") for pid in ("a", "b", "c", "d")}
    dense = Arm("q/dense", "dense", [Scored(passages[p], s) for p, s in (("a", 0.9), ("b", 0.8), ("c", 0.7))],
                [1, 2, 4])  # the third hit returned was dropped
    keyword = Arm("q/bm25", "bm25", [Scored(passages[p], s, array("I", [5])) for p, s in (("c", 20.0), ("d", 2.0))],
                  [1, 2])
    cosines = {pid: {"cosine": value} for pid, value in (("a", 0.9), ("b", 0.8), ("c", 0.7), ("d", 0.6))}
    for method in ("zscore", "rrf", "max"):
        options = {"weights": [1.0, 0.5], "complete": [False, True]}
        fused = fuse_arms([dense, keyword], method, "q", cosines, **options)
        same = fuse([dense.ranking(cosines), keyword.ranking(cosines)], method, "q", **options)
        assert [(h.passage.id, h.score) for h in fused.hits] == [(h.passage.id, h.score) for h in same.hits]
        assert fused.scorer == same.scorer
    fused = {h.passage.id: h for h in fuse_arms([dense, keyword], "zscore", "q", cosines, complete=[False, True]).hits}
    c = fused["c"]
    arms_z = {"dense_fusion_z": c.signals["dense_fusion_z"], "bm25_fusion_z": c.signals["bm25_fusion_z"]}
    assert dict(c.signals) == {"dense": 0.7, "dense_rank": 4, "cosine": 0.7, "bm25": 20.0, "bm25_rank": 1,
                               "zscore": c.score, **arms_z}
    assert c.score == pytest.approx(sum(arms_z.values()))  # each arm's unweighted z: the total at weights 1
    assert (c.path, list(c.terms)) == ("q/bm25", [5])
    assert (fused["a"].path, fused["a"].terms, set(fused["a"].signals)) == ("q/dense", None, {
        "dense", "dense_rank", "cosine", "zscore", "dense_fusion_z", "bm25_fusion_z"})  # no keyword hit: its z too
    assert fused["d"].signals["bm25_rank"] == 2 and "dense" not in fused["d"].signals
    plain = fuse_arms([dense, keyword], "rrf", "q", weights=[1.0, 0.5])  # retrieved without re-scoring: no cosines
    assert all("cosine" not in h.signals for h in plain.hits)
    expected = {"c": 1 / 63 + 0.5 / 61, "a": 1 / 61, "b": 1 / 62, "d": 0.5 / 62}  # by position among the kept hits
    assert ids(plain) == list(expected) and [h.score for h in plain.hits] == pytest.approx(list(expected.values()))
    alone = fuse_arms([dense, Arm("q/bm25", "bm25", [], [])], "max", "q", cosines)
    assert (alone.label, alone.scorer, [h.path for h in alone.hits]) == ("q", "cosine", ["q/dense"] * 3)


def test_candidates_only_hits_join_after_fusion_with_what_fusion_gives_a_candidate_no_arm_returned() -> None:
    """The centred arm proposes candidates and scores nothing: every fused candidate keeps its score and signals,
    the new ones come after them with their re-scoring cosines and each arm's lowest z-score (what z-score fusion
    gives a candidate that arm did not return), and a candidate both found keeps its fused hit."""
    from babelrag.retrieve.fusion import Arm, fuse_arms, with_candidates
    from babelrag.store.schema import Scored

    passages = {pid: Passage(pid, pid, pid, lang) for pid, lang in (("a", "zh"), ("b", "zh"), ("c", "zh"), ("e", "en"))}
    dense = Arm("q/dense", "dense", [Scored(passages[p], s) for p, s in (("a", 0.9), ("b", 0.8), ("c", 0.7))], [1, 2, 3])
    keyword = Arm("q/bm25", "bm25", [Scored(passages["b"], 7.0, array("I", [1]))], [1])
    cosines = {pid: {"cosine": c, "centered": z} for pid, c, z in (("a", 0.9, 0.1), ("b", 0.8, 0.2), ("c", 0.7, 0.0),
                                                                    ("e", 0.6, 0.5))}
    fused = fuse_arms([dense, keyword], "zscore", "q", cosines, complete=[False, True])
    centred = Arm("q/dense-centred", "dense-centred", [Scored(passages[p], s) for p, s in (("e", 0.4), ("a", 0.3))],
                  [1, 2])
    joined = with_candidates(fused, centred, cosines)
    assert joined.hits[:len(fused.hits)] == fused.hits  # nothing fused changes
    (new,) = joined.hits[len(fused.hits):]  # "a" was already a candidate
    lowest = {name: min(h.signals[name] for h in fused.hits) for name in ("dense_fusion_z", "bm25_fusion_z")}
    assert (new.passage.id, new.path, new.score) == ("e", "q/dense-centred", min(h.score for h in fused.hits))
    assert dict(new.signals) == {"cosine": 0.6, "centered": 0.5, **lowest}
    assert lowest["bm25_fusion_z"] == fused.hits[-1].signals["bm25_fusion_z"] < 0  # 0 for a complete arm, standardised
    assert with_candidates(fused, Arm("q/dense-centred", "dense-centred", [], []), cosines) is fused
    alone = with_candidates(dense.ranking(cosines), centred, cosines)  # one arm, not fused: no arm z-scores to give
    assert [h.passage.id for h in alone.hits] == ["a", "b", "c", "e"] and set(alone.hits[-1].signals) == {
        "cosine", "centered"}


def test_one_exact_rare_term_hit_now_ranks_first() -> None:
    """Was: a single keyword hit got z = 0 and added nothing; it is the strongest evidence there is."""
    from babelrag.retrieve.fusion import Arm, fuse_arms
    from babelrag.store.schema import Scored

    dense = ranking("cosine", *[(f"p{i}", 0.85 - i / 500) for i in range(50)])  # the gold passage p5 is 6th
    arms = [Arm("f/dense", "dense", [Scored(h.passage, h.score) for h in dense.hits], range(1, 51)),
            Arm("f/bm25", "bm25", [Scored(Passage("p5", "p5", "p5", "en"), 9.3)], [1])]  # the one holding the rare name
    fused = fuse_arms(arms, "zscore", "f", weights=[1.0, 0.5], complete=[False, True])
    assert ids(fused)[0] == "p5"
    two = fuse([dense, ranking("bm25", ("p5", 20.0), ("p9", 2.0))], "zscore", "f", complete=[False, True])
    scores = {h.passage.id: h.score for h in two.hits}
    assert scores["p5"] - scores["p4"] > scores["p9"] - scores["p8"] > 0  # two hits keep their BM25 gap


def test_weights_drop_out_with_empty_rankings() -> None:
    keyword = ranking("bm25", ("x", 4.0), ("y", 1.0))
    alone = fuse([ranking("cosine"), keyword], "zscore", "f", weights=[1.0, 0.5], complete=[False, True])
    assert [round(h.score, 6) for h in alone.hits] == [0.5, -0.5]  # the keyword arm's own weight, not the dense one's


def test_threshold_on_rank_fusion_totals_is_refused() -> None:
    with pytest.raises(ConfigError, match="threshold"):
        preset_config("hybrid", {"threshold": 0.5, "fusion": "rrf"})
    assert preset_config("hybrid+rerank", {"threshold": 0.5}).threshold == 0.5


def test_overrides_are_yaml_scalars_and_unknown_fields_fail() -> None:
    assert parse_overrides(["k=5", "langs=[sv, en]", "threshold=0.8"]) == {"k": 5, "langs": ["sv", "en"],
                                                                           "threshold": 0.8}
    with pytest.raises(ConfigError, match="no_such_field"):
        preset_config("default", {"no_such_field": 1})
    with pytest.raises(ConfigError, match="preset"):
        preset_config("nope")
    with pytest.raises(ConfigError, match="key=value"):
        parse_overrides(["oops"])
    with pytest.raises(ConfigError, match="--set langs: the value is not a YAML") as refused:
        parse_overrides(["langs=[sv, secret"])
    assert "secret" not in str(refused.value)  # the value is not echoed


def test_ladder_samples_share_their_questions() -> None:
    """Baselines flagged ``sample`` run on the LLM steps' questions; per-KB and per-cell samples are fixed."""
    from babelrag.experiments.ladders import ladder
    from babelrag.experiments.runner import _step_questions
    from babelrag.evaluate.golden import sample_per_cell as llm_sample
    from babelrag.evaluate.golden import GoldenQuestion

    golden = [GoldenQuestion(id=f"{kb}:{lang}:{i}", question="q", lang=lang, kb=kb, gold_pages=("p",))
              for kb in ("A", "B") for lang in ("en", "de") for i in range(5)]
    steps = {s.name: s for s in ladder("coral")}
    own, loop = steps["C_own"], steps["CORAL"]
    assert _step_questions(own, preset_config(own.preset), golden, False, 2, True) == \
        _step_questions(loop, preset_config(loop.preset), golden, False, 2, True) == llm_sample(golden, 2)
    assert len(llm_sample(golden, 2)) == 8 and len(_step_questions(own, preset_config(own.preset), golden, False,
                                                                   None, False, per_kb=3)) == 6
    assert _step_questions(steps["C_all (MultiRAG)"], preset_config("hybrid"), golden, False, 2, True) == \
        llm_sample(golden, 2)
    assert _step_questions(ladder("blog")[0], preset_config("keyword"), golden, False, 2, True) == golden


def test_bench_summary_prints_answer_ladders_without_retrieval_metrics(capsys: pytest.CaptureFixture) -> None:
    """no-RAG retrieves nothing: its cells have answer metrics only, and the summary must still print."""
    from babelrag.cli.eval_commands import _print_metrics

    cell = {"kb": "SE", "lang": "sv", "n": 2, "answer_char3": 0.25}
    _print_metrics({"no-RAG": {"overall": {"n": 2, "answer_char3": 0.25, "answer_em": 0.0}, "cells": [cell]},
                    "MultiRAG": {"overall": {"n": 2, "answer_char3": 0.5, "recall@10": 1.0},
                                 "cells": [dict(cell, answer_char3=0.5, **{"recall@10": 1.0})]}})
    printed = capsys.readouterr().out
    assert "worst cell by char3" in printed and "0.250" in printed and "0.500" in printed


def test_translation_prompt_example_when_source_and_targets_take_fr_es_de() -> None:
    from babelrag.models.translate import EXAMPLE, _prompt

    messages = _prompt("Quelle heure est-il ?", "fr", ["es", "de"])
    example = messages[1]["content"]
    assert example.startswith("Translate from") and not any(EXAMPLE[lang] in example for lang in ("fr", "es", "de"))


def test_retrieval_cache_key_includes_the_segments() -> None:
    from babelrag.config import preset_config
    from babelrag.retrieve.cache import RetrievalCache
    from babelrag.types import SearchRequest

    class FakeKB:
        name = "kb"

        @staticmethod
        def identity() -> dict:
            return {"kb": "kb", "updated_at": "t"}

    one = SearchRequest("[GLOB] x | [LOCAL:de] y", "kb", "de", segments=(("x", "en"), ("y", "de")))
    other = SearchRequest("[GLOB] x | [LOCAL:de] y", "kb", "de", segments=(("x", "en"), ("y", "en")))
    config = preset_config("hybrid")
    assert RetrievalCache.key(FakeKB(), one, config) != RetrievalCache.key(FakeKB(), other, config)


def test_in_order_keeps_order_overlaps_and_carries_the_deadline() -> None:
    import threading
    import time as clock

    from babelrag import deadline
    from babelrag.concurrency import in_order

    lock, running, most = threading.Lock(), [0], [0]

    def slow_first(n: int) -> tuple[int, float | None]:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        clock.sleep(0.05 if n == 0 else 0.01)
        with lock:
            running[0] -= 1
        return n, deadline.remaining()

    with deadline.limit(30), in_order(slow_first, range(6), 3) as results:
        done = list(results)
    assert [n for n, _ in done] == list(range(6))  # the slow first item still comes first
    assert most[0] >= 2  # really at the same time
    assert all(left is not None and 0 < left <= 30 for _, left in done)  # the request's deadline holds there


def test_in_order_raises_in_place_and_stops_what_runs_when_left_early() -> None:
    import time as clock

    from babelrag import deadline
    from babelrag.concurrency import in_order

    def third_fails(n: int) -> int:
        if n == 2:
            raise ValueError("item 2")
        return n

    seen = []
    with pytest.raises(ValueError, match="item 2"), in_order(third_fails, range(5), 2) as results:
        seen.extend(results)
    assert seen == [0, 1]

    stopped = []

    def waits_for_its_deadline(n: int) -> int:
        for _ in range(200 if n else 0):  # a long job checks its deadline between model calls
            if (left := deadline.remaining()) is not None and left <= 0:
                stopped.append(n)
                return n
            clock.sleep(0.01)
        return n

    started = clock.perf_counter()
    with pytest.raises(RuntimeError), in_order(waits_for_its_deadline, range(4), 2) as results:
        next(results)
        raise RuntimeError("the caller gives up")
    assert clock.perf_counter() - started < 1.5 and stopped  # told to stop, not left running for 2 s
