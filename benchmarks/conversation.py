"""Benchmark: follow-up turns made standalone before retrieval, against searching the last turn alone.

A multi-turn set built from the shipped XQuAD (CC BY-SA 4.0), from the questions that name their
article's subject (e.g. "How many people live in Fresno?"), two kinds of follow-up, each in the question's
language, each with the question's paragraph as its gold — a page the first turn was not about:
- ``entity``: the first turn asks the same thing about another article's subject ("How many people live
  in Oxygen?" — only the entity differs; the first turn is often odd for it) and the follow-up names the
  question's own subject alone ("What about Fresno?", "Und Fresno?", "¿Y Fresno?", "Peki Fresno?");
- ``pronoun``: the first turn is another question on another paragraph of the same article, and the
  follow-up is the question with its subject replaced by a pronoun ("How many people live in it?").
Languages are those whose questions spell the English title (en, de, es, tr); other scripts cannot be
built this way.

Both arms search the pooled KB (every language version of every paragraph) with the `multirag` preset
(hybrid, learned rerank, k = 10), the question's language detected as a user's would be: the baseline
searches the follow-up as written, the other makes it standalone first (`generate/conversation.py`, the
configured LLM, JSON constrained at decoding, the rewrite checked). Reported: Recall@10 both ways, the
paired sign-flip test (`babelrag.evaluate.significance.compare`, rows clustered by the XQuAD question id,
so one question's language versions count once), R@1 and MRR, and how many rewrites failed (searched as
the last turn, as in service). The rewrite checks were set after reading the `--per-lang 20` set's
rewrites; `--held-out-from 20` measures on the questions that set does not contain.

Run: python benchmarks/conversation.py [--llm qwen2.5-coder-1.5b] [--per-lang N] [--held-out-from N] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import random
import re
import time
from dataclasses import dataclass

from common import XQUAD, bench_store, ensure_pooled_xquad, need_data, table

from babelrag.experiments.squad import SquadQuestion, load_squad_folder
from babelrag.config import preset_config
from babelrag.evaluate.metrics import retrieval_scores
from babelrag.evaluate.significance import compare
from babelrag.generate.conversation import LLMCondenser
from babelrag.kb import KnowledgeBase
from babelrag.lang.detect import detector
from babelrag.models.llm import build_llm
from babelrag.retrieve.pipeline import Searcher
from babelrag.types import Question, Trace

FOLLOW_UPS = {"en": "What about {}?", "de": "Und {}?", "es": "¿Y {}?", "tr": "Peki {}?"}
PRONOUNS = {"en": "it", "de": "es", "es": "eso", "tr": "o"}
K = 10


@dataclass(frozen=True)
class FollowUp:
    kind: str  # entity | pronoun
    qid: str
    lang: str
    first: str  # the first turn: the question about another article's subject
    follow_up: str  # the last turn: the question's own subject alone
    standalone: str  # the question as XQuAD asks it (what a perfect rewrite would search)
    gold: str  # its paragraph


def subject(title: str) -> str:
    """An article's subject as questions spell it: "Fresno,_California" → "Fresno", "Sky_(United_Kingdom)" → "Sky"."""
    return re.split(r"[,(]", title.replace("_", " "))[0].strip()


def mention(name: str) -> re.Pattern[str]:
    return re.compile(rf"\b{re.escape(name)}\b", re.IGNORECASE)


def build(questions: list[SquadQuestion], titles: dict[str, str], per_lang: int, seed: int) -> list[FollowUp]:
    """Both kinds of follow-up, ``per_lang`` of each per language (0: all), in a fixed seeded order."""
    rng, out = random.Random(seed), []
    for lang, template in FOLLOW_UPS.items():
        naming = [(q, subject(titles[q.page])) for q in questions
                  if q.lang == lang and mention(subject(titles[q.page])).search(q.text)]
        subjects = sorted({name for _, name in naming})
        rng.shuffle(naming)
        for q, own in naming[:per_lang or None]:
            other = rng.choice([name for name in subjects if name != own])
            first = mention(own).sub(lambda _: other, q.text, count=1)
            out.append(FollowUp("entity", q.qid, lang, first, template.format(own), q.text, q.page))
        pronoun = [(q, own, [p for p, name in naming if name == own and p.page != q.page]) for q, own in naming]
        for q, own, before in [item for item in pronoun if item[2]][:per_lang or None]:
            follow_up = mention(own).sub(lambda _: PRONOUNS[lang], q.text, count=1)
            out.append(FollowUp("pronoun", q.qid, lang, rng.choice(before).text, follow_up, q.text, q.page))
    return out


def held_out(items: list[FollowUp], seen: set[str], per_lang: int) -> list[FollowUp]:
    """The follow-ups on questions not in ``seen``, at most ``per_lang`` per kind and language (0: all)."""
    out: list[FollowUp] = []
    for item in items:
        if item.qid not in seen and (not per_lang or
                                     sum((o.kind, o.lang) == (item.kind, item.lang) for o in out) < per_lang):
            out.append(item)
    return out


def row(item: FollowUp, pages: list[str], failed: bool = False) -> dict:
    """A per-question row as ``compare`` reads it: its cell is (kind, language), its cluster the XQuAD id."""
    return {"id": f"{item.kind}:{item.lang}:{item.qid}", "kb": item.kind, "lang": item.lang,
            "tags": {"qid": item.qid}, "failed": failed, **retrieval_scores(pages, [item.gold], K)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--llm", default="qwen2.5-coder-0.5b", help="the rewriting model (a config `llm` spec)")
    parser.add_argument("--per-lang", type=int, default=0, help="follow-ups per language (0 = all)")
    parser.add_argument("--held-out-from", type=int, default=0, metavar="N",
                        help="leave out every question of the --per-lang N set (the rewrite checks were set after "
                             "looking at the N = 20 set: this measures them on questions they never saw)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="write the rows and the comparison as JSON here")
    args = parser.parse_args()
    need_data()
    corpus = load_squad_folder(XQUAD, list(FOLLOW_UPS))
    items = build(corpus.questions, corpus.titles, 0 if args.held_out_from else args.per_lang, args.seed)
    if args.held_out_from:
        seen = {item.qid for item in build(corpus.questions, corpus.titles, args.held_out_from, args.seed)}
        items = held_out(items, seen, args.per_lang)
    store = bench_store()
    kb_name = ensure_pooled_xquad(store)
    config = preset_config("multirag", {"k": K})
    base_rows, rewritten_rows, examples = [], [], []
    started = time.perf_counter()
    with KnowledgeBase.open(kb_name, store) as kb:
        searcher = Searcher(kb, config)
        condenser = LLMCondenser(build_llm(args.llm), detector(tuple(kb.manifest.detect_languages)))
        for item in items:
            base = searcher.search(Question(item.follow_up))
            base_rows.append(row(item, base.evidence.doc_ids()))
            trace = Trace()
            standalone = condenser.standalone(Question(item.follow_up), [("user", item.first)], trace)
            result = searcher.search(standalone)
            rewritten_rows.append(row(item, result.evidence.doc_ids(), failed=bool(trace.failures)))
            examples.append({"kind": item.kind, "first": item.first, "follow_up": item.follow_up, "rewrite": standalone.text,
                             "xquad": item.standalone, "failed": bool(trace.failures)})
    comparison = compare(base_rows, rewritten_rows, f"recall@{K}")
    overall = comparison["overall"]

    def by_kind(kind: str, metric: str = f"recall@{K}") -> list:
        test = compare([r for r in base_rows if r["kb"] == kind], [r for r in rewritten_rows if r["kb"] == kind],
                       metric)["overall"]
        return [test["n"], test["mean_a"], test["mean_b"], test["delta"], "—" if test["p"] is None else test["p"]]

    table(f"Follow-ups on pooled xquad-dev: last turn alone vs made standalone ({args.llm}); n = {len(items)} "
          f"questions, {overall.get('clusters', len(items))} XQuAD question clusters",
          ["kind × lang", "n", f"R@{K} last turn", f"R@{K} standalone", "delta", "p (paired, by question)"],
          [[f"{c['kb']} × {c['lang']}", c["n"], c["mean_a"], c["mean_b"], c["delta"], "—" if c["p"] is None else c["p"]]
           for c in comparison["cells"]]
          + [[f"{kind} (all)", *by_kind(kind)] for kind in ("entity", "pronoun")]
          + [["all", overall["n"], overall["mean_a"], overall["mean_b"], overall["delta"],
              "—" if overall["p"] is None else overall["p"]]])
    table("The same rows at the top of the list (R@10 is near its ceiling here: an article's ~5 paragraphs fit "
          "in ten slots)", ["metric × kind", "last turn", "standalone", "delta", "p (paired, by question)"],
          [[f"{metric} × {kind}", *by_kind(kind, metric)[1:]] for metric in ("recall@1", "mrr")
           for kind in ("entity", "pronoun")])
    failed = sum(r["failed"] for r in rewritten_rows)
    print(f"rewrites that failed (searched as the last turn): {failed} of {len(items)}; "
          f"{time.perf_counter() - started:.0f} s")
    for example in examples[:: max(1, len(examples) // 6)]:
        print(json.dumps(example, ensure_ascii=False))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump({"llm": args.llm, "n": len(items), "comparison": comparison, "failed": failed,
                       "examples": examples, "last_turn": base_rows, "standalone": rewritten_rows}, handle,
                      ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
