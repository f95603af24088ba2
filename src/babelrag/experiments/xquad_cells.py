"""The XQuAD cell benchmarks: country knowledge bases built like the practitioner's (docs/methods.md#cells).

From any folder of parallel SQuAD-format files: each "country" gets a disjoint set of
articles, a local language and a language mix — *mixed* (each page in the pivot only, the local
language only, or both: a third each, so gold availability differs by language), *bilingual*
(every page in both), *pivot-only*, or *unique* (each page in the pivot only or the local language
only, never both: the unique-country layout, where a page has no translation to fall back on).
Questions come in the pivot language, the local language and one language absent from that KB.
Every question is dev or test by a hash of its *article* (``split_of``; ``split_by: question``
hashes its XQuAD id instead), so the test split holds pages no design choice was made on and a
question's translations never straddle the split. All countries share one index, told apart by
``country`` metadata (so the country filter matters), beside (parallel layout only) a *pooled*
index holding every language version of every page with no country. Deterministic for a seed; the
recipe is written as YAML.
"""
from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict

from babelrag.experiments.io import write_jsonl
from babelrag.experiments.squad import SquadCorpus, load_squad_folder
from babelrag.errors import InputError
from babelrag.evaluate.golden import GoldenQuestion, save_golden

Mix = Literal["mixed", "bilingual", "pivot-only", "unique"]
Layout = Literal["parallel", "unique-country"]
SplitBy = Literal["article", "question"]
CELLS_INDEX = "xquad-cells"
UNIQUE_INDEX = "xquad-unique"
POOLED_INDEX = "xquad-pooled"
DEV_SHARE = 0.25  # of articles: the dev split (design choices, fitting, τ); the rest is the reported test split


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
    layout: Layout = "parallel"
    source: str
    seed: int = 13
    pivot: str = "en"
    dev_share: float = DEV_SHARE
    split_by: SplitBy = "article"
    questions_per_cell: int | None = None
    pooled_articles: list[str]
    pooled_questions_per_lang: int | None = None
    countries: list[Country]

    @property
    def index(self) -> str:
        return CELLS_INDEX if self.layout == "parallel" else UNIQUE_INDEX

    def split(self, qid: str, article: str) -> str:
        return split_for(qid, article, self.split_by, self.dev_share)


# a country whose language it is (ISO 3166 alpha-2, so the service's country check accepts the bench KBs)
COUNTRY_OF = {"ar": "SA", "de": "DE", "el": "GR", "en": "US", "es": "ES", "hi": "IN", "ro": "RO", "ru": "RU",
              "th": "TH", "tr": "TR", "vi": "VN", "zh": "CN", "sv": "SE", "ja": "JP", "ko": "KR", "fr": "FR",
              "it": "IT", "pt": "PT", "pl": "PL", "id": "ID", "nl": "NL", "fi": "FI"}


def country_for(lang: str) -> str:
    """The benchmark country of a local language: its country's ISO code, or the language code in capitals
    for a language the table does not know."""
    return COUNTRY_OF.get(lang, lang.upper())


def default_recipe(corpus: SquadCorpus, seed: int = 13, pivot: str = "en", quick: bool = False,
                   layout: Layout = "parallel", split_by: SplitBy = "article") -> CellsRecipe:
    """Every non-pivot language becomes a country — alternating mixed/bilingual plus one pivot-only
    country (parallel), or every one unique (unique-country); articles are dealt out after a seeded
    shuffle. ``quick`` keeps a fixed small sample."""
    if pivot not in corpus.langs:
        raise InputError(corpus.folder, None, f"xquad-cells needs the pivot language '{pivot}' "
                                              f"(found {', '.join(corpus.langs)}); pass another --pivot")
    rng = random.Random(seed)
    locals_ = [lang for lang in corpus.langs if lang != pivot]
    if layout == "unique-country":
        plan: list[tuple[str, str, Mix]] = [(country_for(lang), lang, "unique") for lang in locals_]
        rng = random.Random(f"{seed}:unique")  # another deal of the articles than the parallel countries'
    else:
        plan = [(country_for(lang), lang, "mixed" if i % 2 == 0 else "bilingual") for i, lang in enumerate(locals_)]
        plan.append((country_for(pivot), pivot, "pivot-only"))
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
    pooled = [] if layout != "parallel" else articles[:4] if quick else articles
    return CellsRecipe(name="xquad-cells" if layout == "parallel" else "xquad-unique", layout=layout,
                       source=str(corpus.folder), seed=seed, pivot=pivot, countries=countries, split_by=split_by,
                       questions_per_cell=(20 if layout == "parallel" else 10) if quick else None,
                       pooled_articles=pooled,
                       pooled_questions_per_lang=10 if quick else None)


def split_of(key: str, dev_share: float) -> str:
    """dev or test by a hash of an article title (or a question id): the same in every language, layout,
    seed, quick or full build, so nothing fitted on one build's dev questions is ever scored on another
    build's test questions, and a test page is never a dev page in another layout."""
    bucket = int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "dev" if bucket < dev_share else "test"


def split_for(qid: str, article: str, split_by: SplitBy = "article", dev_share: float = DEV_SHARE) -> str:
    """dev or test: by the question's article (new pages in test), or by its id (new questions on seen pages)."""
    return split_of(article if split_by == "article" else qid, dev_share)


def _page_langs(country: Country, pages: list[str], pivot: str, seed: int) -> dict[str, list[str]]:
    """Which language versions of each page the KB holds (mixed: exact thirds after a seeded shuffle;
    unique: halves, one language each)."""
    if country.mix not in ("mixed", "unique"):
        return {page: country.kb_langs(pivot) for page in pages}
    order = sorted(pages)
    random.Random(f"{seed}:{country.code}").shuffle(order)
    choices = ([pivot], [country.local]) + (([pivot, country.local],) if country.mix == "mixed" else ())
    return {page: choices[i % len(choices)] for i, page in enumerate(order)}


def build(recipe: CellsRecipe, out: Path) -> dict[str, Any]:
    """Write ``kb-<index>.jsonl`` (and ``kb-pooled.jsonl``), ``golden.jsonl`` and ``recipe.yaml`` to ``out``."""
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
                    id=f"{country.code if recipe.layout == 'parallel' else country.kb}:{lang}:{q.qid}", question=q.text, lang=lang, kb=country.kb,
                    index=recipe.index, country=country.code, gold_pages=(q.page,), answers=corpus.answers(q.qid),
                    tags=question_tags(recipe, q.qid, q.page, corpus.titles[q.page], held, lang)))
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
                tags=question_tags(recipe, q.qid, q.page, corpus.titles[q.page], corpus.langs, lang)))
    indexes = {recipe.index: out / f"kb-{recipe.index}.jsonl"}
    write_jsonl(indexes[recipe.index], cells_rows)
    if pooled_rows:
        indexes[POOLED_INDEX] = out / "kb-pooled.jsonl"
        write_jsonl(indexes[POOLED_INDEX], pooled_rows)
    save_golden(golden, out / "golden.jsonl")
    (out / "recipe.yaml").write_text(yaml.safe_dump(recipe.model_dump(), sort_keys=False, allow_unicode=True),
                                     encoding="utf-8")
    (out / "LICENSE.txt").write_text("Derived from XQuAD (google-deepmind/xquad): CC BY-SA 4.0.\n", encoding="utf-8")
    return {"indexes": indexes, "golden": out / "golden.jsonl", "passages": len(cells_rows) + len(pooled_rows),
            "questions": len(golden)}


def question_tags(recipe: CellsRecipe, qid: str, page: str, article: str, held: list[str], lang: str) -> dict[str, str]:
    """What reports and statistics read off a question: its split, its cluster (qid, page, article), the
    layout, and where its gold page exists (gold in the question's language or only elsewhere)."""
    return {"split": recipe.split(qid, article), "qid": qid, "page": page, "article": article,
            "layout": recipe.layout, "gold_langs": ",".join(held), "gold_in_question_lang": str(lang in held).lower()}


def load_recipe(path: Path) -> CellsRecipe:
    return CellsRecipe.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
