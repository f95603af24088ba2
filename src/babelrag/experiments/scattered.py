"""Knowledge bases whose pages each exist in one language only: the cross-lingual case.

- *scattered*: every XQuAD page kept in exactly one language (languages dealt out evenly over a seeded
  shuffle of the pages), questions asked in every language — so most questions' gold page is in
  another language and no translation of it is there to fall back on.
- *mixed*: SweFAQ's Swedish FAQ answers beside XQuAD pages scattered over the other languages, one
  KB: Swedish questions to the FAQ, and XQuAD's questions in every language.
- *skewed*: every page in one language, three of every four in English and the rest dealt over the other
  languages, questions in every language — a KB mostly written in one language, as most are. An English
  question's candidates are then mostly English, so a page in a minority language has to stand out against a
  crowd of same-language candidates; this is the layout that says whether a path that looks monolingual may be
  ranked as one.
- *skewed-local*: as *skewed*, but the dominant language is one of the corpus's other languages (dealt by the
  seed), so English is a minority. Kept aside: the shipped relevance model is never fitted on it and ``bench`` runs
  it only when named, so it checks on a layout nothing was fitted or tuned on whether the default generalises.

Splits are by article (``xquad_cells.split_of``), as in the parallel layouts, so a test page was never
a dev page in any layout. Deterministic for a seed.
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from babelrag.experiments.io import write_jsonl
from babelrag.experiments.squad import SquadCorpus
from babelrag.experiments.xquad_cells import SplitBy, split_for
from babelrag.evaluate.golden import GoldenQuestion, save_golden

SCATTERED_INDEX = "xquad-scattered"
MIXED_INDEX = "mixed"
SKEWED_INDEX = "xquad-skewed"
SKEWED_LOCAL_INDEX = "xquad-skewed-local"
DOMINANT = "en"  # the language a skewed KB is mostly written in (the corpus's first when it has no English)
DOMINANT_SHARE = 3  # pages in the dominant language for each page in another one
QUICK_ARTICLES = 10  # pages of this many articles in a quick build
QUICK_PER_LANG = 15  # questions per language in a quick build (quick is a smoke test of every layout)


def scatter(pages: list[str], langs: list[str], seed: str) -> dict[str, str]:
    """Each page's one language: languages dealt round-robin over a seeded shuffle, so each holds an
    equal share of the pages."""
    order = sorted(pages)
    random.Random(seed).shuffle(order)
    return {page: langs[i % len(langs)] for i, page in enumerate(order)}


def _articles(corpus: SquadCorpus, quick: bool, seed: str) -> list[str]:
    articles = corpus.articles()
    if quick:
        rng = random.Random(seed)
        articles = sorted(rng.sample(articles, min(QUICK_ARTICLES, len(articles))))
    return articles


def scattered_part(corpus: SquadCorpus, langs: list[str], kb: str, index: str, layout: str, seed: str,
                   quick: bool, split_by: SplitBy) -> tuple[list[dict[str, Any]], list[GoldenQuestion]]:
    """Passages (each page in one of ``langs``) and questions in every language of the corpus."""
    articles = set(_articles(corpus, quick, seed))
    pages = [page for page, title in corpus.titles.items() if title in articles and
             all(page in corpus.pages[lang] for lang in langs)]
    held = scatter(pages, langs, seed)
    passages = [{"id": f"{kb}:{lang}:{page}", "doc_id": page, "title": corpus.titles[page],
                 "text": corpus.pages[lang][page], "lang": lang, "scope": "global"} for page, lang in held.items()]
    rng = random.Random(f"{seed}:questions")
    golden = []
    for lang in corpus.langs:
        asked = [q for q in corpus.questions if q.lang == lang and q.page in held]
        if quick and len(asked) > QUICK_PER_LANG:
            asked = sorted(rng.sample(asked, QUICK_PER_LANG), key=lambda q: q.qid)
        for q in asked:
            article = corpus.titles[q.page]
            golden.append(GoldenQuestion(
                id=f"{kb}:{lang}:{q.qid}", question=q.text, lang=lang, kb=kb, index=index, gold_pages=(q.page,),
                answers=corpus.answers(q.qid),
                tags={"split": split_for(q.qid, article, split_by), "qid": q.qid, "page": q.page, "article": article,
                      "layout": layout, "gold_langs": held[q.page],
                      "gold_in_question_lang": str(held[q.page] == lang).lower()}))
    return passages, golden


def build_scattered(corpus: SquadCorpus, out: Path, quick: bool, seed: int,
                    split_by: SplitBy = "article") -> dict[str, Any]:
    """Write ``kb-xquad-scattered.jsonl`` and ``golden.jsonl`` to ``out``."""
    passages, golden = scattered_part(corpus, corpus.langs, "scattered", SCATTERED_INDEX, "scattered",
                                      f"{seed}:scattered", quick, split_by)
    return _write(out, SCATTERED_INDEX, passages, golden, "Derived from XQuAD (google-deepmind/xquad): CC BY-SA 4.0.")


def build_skewed(corpus: SquadCorpus, out: Path, quick: bool, seed: int,
                 split_by: SplitBy = "article") -> dict[str, Any]:
    """Write ``kb-xquad-skewed.jsonl`` and ``golden.jsonl`` to ``out``: each page in one language, ``DOMINANT``
    holding ``DOMINANT_SHARE`` of every ``DOMINANT_SHARE + 1`` pages and the others an equal share of the rest."""
    dominant = DOMINANT if DOMINANT in corpus.langs else corpus.langs[0]
    return _skewed_toward(corpus, dominant, out, quick, seed, split_by, SKEWED_INDEX, "skewed")


def build_skewed_local(corpus: SquadCorpus, out: Path, quick: bool, seed: int,
                       split_by: SplitBy = "article") -> dict[str, Any]:
    """As ``build_skewed``, toward a language other than ``DOMINANT`` chosen by the seed (``DOMINANT`` itself only
    when the corpus has no other language)."""
    others = sorted(lang for lang in corpus.langs if lang != DOMINANT) or list(corpus.langs)
    dominant = random.Random(f"{seed}:skewed-local:dominant").choice(others)
    return _skewed_toward(corpus, dominant, out, quick, seed, split_by, SKEWED_LOCAL_INDEX, "skewed-local")


def _skewed_toward(corpus: SquadCorpus, dominant: str, out: Path, quick: bool, seed: int, split_by: SplitBy,
                   index: str, layout: str) -> dict[str, Any]:
    others = [lang for lang in corpus.langs if lang != dominant]
    langs = [dominant] * (DOMINANT_SHARE * max(len(others), 1)) + others  # dealt round-robin by ``scatter``
    passages, golden = scattered_part(corpus, langs, layout, index, layout, f"{seed}:{layout}", quick, split_by)
    return _write(out, index, passages, golden, "Derived from XQuAD (google-deepmind/xquad): CC BY-SA 4.0.")


def build_mixed(corpus: SquadCorpus, faq: Path, out: Path, quick: bool, seed: int,
                split_by: SplitBy = "article") -> dict[str, Any]:
    """SweFAQ's Swedish answers and questions (``swefaq.build``) beside XQuAD pages scattered over the
    corpus's other languages, in one KB."""
    from babelrag.experiments import swefaq

    faq_passages = [{**row, "id": f"mixed:{row['id']}"} for row in swefaq.passages(faq)]
    faq_golden = [q.model_copy(update={"id": f"mixed:{q.id}", "kb": "mixed", "index": MIXED_INDEX, "country": None,
                                       "tags": {**q.tags, "layout": "mixed"}})
                  for q in swefaq.questions(faq, 20 if quick else None)]
    langs = [lang for lang in corpus.langs if lang != "sv"]
    passages, golden = scattered_part(corpus, langs, "mixed", MIXED_INDEX, "mixed", f"{seed}:mixed", quick, split_by)
    return _write(out, MIXED_INDEX, faq_passages + passages, faq_golden + golden,
                  "Derived from SweFAQ (SuperLim-2, Språkbanken Text, CC BY 4.0) and XQuAD "
                  "(google-deepmind/xquad, CC BY-SA 4.0); the XQuAD part stays CC BY-SA 4.0.")


def _write(out: Path, index: str, passages: list[dict[str, Any]], golden: list[GoldenQuestion],
           license_text: str) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(out / f"kb-{index}.jsonl", passages)
    save_golden(golden, out / "golden.jsonl")
    (out / "LICENSE.txt").write_text(license_text + "\n", encoding="utf-8")
    return {"indexes": {index: out / f"kb-{index}.jsonl"}, "golden": out / "golden.jsonl",
            "passages": len(passages), "questions": len(golden)}
