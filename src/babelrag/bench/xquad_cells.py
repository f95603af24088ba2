"""The XQuAD cell benchmark: country knowledge bases built like the practitioner's (SPEC §2).

From any folder of parallel SQuAD-format files: each "country" gets a disjoint set of
articles, a local language and a language mix — *mixed* (each page in the pivot only, the local
language only, or both: a third each, so gold availability differs by language), *bilingual*
(every page in both) or *pivot-only*. Questions come in the pivot language, the local language
and one language absent from that KB; each is dev or test by a hash of its XQuAD id (``split_of``).
All countries share one index, told apart by ``country`` metadata (so the country filter matters),
beside a *pooled* index holding every language version of every page with no country.
Deterministic for a seed; the recipe is written as YAML.
"""
from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict

from babelrag.bench.io import write_jsonl
from babelrag.bench.squad import SquadCorpus, load_squad_folder
from babelrag.errors import InputError
from babelrag.evaluate.golden import GoldenQuestion, save_golden

Mix = Literal["mixed", "bilingual", "pivot-only"]
CELLS_INDEX = "xquad-cells"
POOLED_INDEX = "xquad-pooled"


class Country(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str
    local: str
    mix: Mix
    articles: list[str]
    question_langs: list[str]

    @property
    def kb(self) -> str:
        return f"{self.code}-{self.mix}"

    def kb_langs(self, pivot: str) -> list[str]:
        return [pivot] if self.mix == "pivot-only" else [pivot, self.local]


class CellsRecipe(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = "xquad-cells"
    source: str
    seed: int = 13
    pivot: str = "en"
    dev_share: float = 0.2
    questions_per_cell: int | None = None
    pooled_articles: list[str]
    pooled_questions_per_lang: int | None = None
    countries: list[Country]


def default_recipe(corpus: SquadCorpus, seed: int = 13, pivot: str = "en", quick: bool = False) -> CellsRecipe:
    """Every non-pivot language becomes a country (alternating mixed/bilingual) plus one pivot-only
    country; articles are dealt out after a seeded shuffle. ``quick`` keeps a fixed small sample."""
    if pivot not in corpus.langs:
        raise InputError(corpus.folder, None, f"xquad-cells needs the pivot language '{pivot}' "
                                              f"(found {', '.join(corpus.langs)}); pass another --pivot")
    rng = random.Random(seed)
    locals_ = [lang for lang in corpus.langs if lang != pivot]
    plan: list[tuple[str, str, Mix]] = [(lang.upper(), lang, "mixed" if i % 2 == 0 else "bilingual")
                                        for i, lang in enumerate(locals_)]
    plan.append((pivot.upper(), pivot, "pivot-only"))
    articles = corpus.articles()
    rng.shuffle(articles)
    per_country = max(1, len(articles) // len(plan))
    if quick:
        per_country = min(per_country, 2)
    plan = plan[:max(1, len(articles) // per_country)]  # fewer articles than countries: fewer countries
    countries = []
    for i, (code, local, mix) in enumerate(plan):
        in_kb = {pivot, local}
        absent = rng.choice(sorted(set(corpus.langs) - in_kb)) if set(corpus.langs) - in_kb else None
        langs = [pivot] + ([local] if local != pivot else []) + ([absent] if absent else [])
        countries.append(Country(code=code, local=local, mix=mix,
                                 articles=articles[i * per_country:(i + 1) * per_country], question_langs=langs))
    pooled = articles[:4] if quick else articles
    return CellsRecipe(source=str(corpus.folder), seed=seed, pivot=pivot, countries=countries,
                       questions_per_cell=20 if quick else None, pooled_articles=pooled,
                       pooled_questions_per_lang=10 if quick else None)


def split_of(qid: str, dev_share: float) -> str:
    """dev or test by a hash of the question id: the same in every language (a question's translations
    never straddle the split), every seed, quick or full build, so nothing fitted on one build's dev
    questions is ever scored on another build's test questions."""
    bucket = int(hashlib.sha256(qid.encode("utf-8")).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "dev" if bucket < dev_share else "test"


def _page_langs(country: Country, pages: list[str], pivot: str, seed: int) -> dict[str, list[str]]:
    """Which language versions of each page the KB holds (mixed: exact thirds after a seeded shuffle)."""
    if country.mix != "mixed":
        return {page: country.kb_langs(pivot) for page in pages}
    order = sorted(pages)
    random.Random(f"{seed}:{country.code}").shuffle(order)
    choices = ([pivot], [country.local], [pivot, country.local])
    return {page: choices[i % 3] for i, page in enumerate(order)}


def build(recipe: CellsRecipe, out: Path) -> dict[str, Any]:
    """Write ``kb-cells.jsonl``, ``kb-pooled.jsonl``, ``golden.jsonl`` and ``recipe.yaml`` to ``out``."""
    corpus = load_squad_folder(recipe.source)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(recipe.seed)
    pages_of: dict[str, list[str]] = {}
    for page, title in corpus.titles.items():
        pages_of.setdefault(title, []).append(page)
    cells_rows, pooled_rows, golden = [], [], []
    by_qid_lang = {(q.qid, q.lang): q for q in corpus.questions}
    for country in recipe.countries:
        pages = [p for a in country.articles for p in pages_of.get(a, [])]
        holdings = _page_langs(country, pages, recipe.pivot, recipe.seed)
        for page in pages:
            for lang in holdings[page]:
                text = corpus.pages.get(lang, {}).get(page)
                if text:
                    cells_rows.append({"id": f"{country.code}:{lang}:{page}", "doc_id": page,
                                       "title": corpus.titles[page], "text": text, "lang": lang,
                                       "country": country.code, "scope": "local"})
        qids = sorted({q.qid for q in corpus.questions if q.page in holdings})
        for lang in country.question_langs:
            asked = [by_qid_lang[(qid, lang)] for qid in qids if (qid, lang) in by_qid_lang]
            if recipe.questions_per_cell and len(asked) > recipe.questions_per_cell:
                asked = sorted(rng.sample(asked, recipe.questions_per_cell), key=lambda q: q.qid)
            for q in asked:
                held = holdings[q.page]
                golden.append(GoldenQuestion(
                    id=f"{country.code}:{lang}:{q.qid}", question=q.text, lang=lang, kb=country.kb,
                    index=CELLS_INDEX, country=country.code, gold_pages=(q.page,), answers=corpus.answers(q.qid),
                    tags={"split": split_of(q.qid, recipe.dev_share), "qid": q.qid,
                          "gold_langs": ",".join(held), "gold_in_question_lang": str(lang in held).lower()}))
    pooled_pages = [p for a in recipe.pooled_articles for p in pages_of.get(a, [])]
    for lang in corpus.langs:
        for page in pooled_pages:
            if page in corpus.pages[lang]:
                pooled_rows.append({"id": f"pooled:{lang}:{page}", "doc_id": page, "title": corpus.titles[page],
                                    "text": corpus.pages[lang][page], "lang": lang, "scope": "global"})
        asked = [q for q in corpus.questions if q.lang == lang and q.page in set(pooled_pages)]
        if recipe.pooled_questions_per_lang and len(asked) > recipe.pooled_questions_per_lang:
            asked = sorted(rng.sample(asked, recipe.pooled_questions_per_lang), key=lambda q: q.qid)
        for q in asked:
            golden.append(GoldenQuestion(
                id=f"pooled:{lang}:{q.qid}", question=q.text, lang=lang, kb="pooled", index=POOLED_INDEX,
                gold_pages=(q.page,), answers=corpus.answers(q.qid),
                tags={"split": split_of(q.qid, recipe.dev_share), "gold_langs": "all",
                      "qid": q.qid}))
    write_jsonl(out / "kb-cells.jsonl", cells_rows)
    write_jsonl(out / "kb-pooled.jsonl", pooled_rows)
    save_golden(golden, out / "golden.jsonl")
    (out / "recipe.yaml").write_text(yaml.safe_dump(recipe.model_dump(), sort_keys=False, allow_unicode=True),
                                     encoding="utf-8")
    (out / "LICENSE.txt").write_text("Derived from XQuAD (google-deepmind/xquad): CC BY-SA 4.0.\n", encoding="utf-8")
    return {"indexes": {CELLS_INDEX: out / "kb-cells.jsonl", POOLED_INDEX: out / "kb-pooled.jsonl"},
            "golden": out / "golden.jsonl", "passages": len(cells_rows) + len(pooled_rows), "questions": len(golden)}


def load_recipe(path: Path) -> CellsRecipe:
    return CellsRecipe.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
