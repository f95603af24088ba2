"""Gold availability ([DELTA] Table 1 analogue; docs/methods.md#gold-availability): per question language, how often the gold
page exists in each language of the KB — counted per page, not per passage — with retrieval
Recall@k alongside (availability is not answerability: retrieval can still help without it)."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from babelrag.config import preset_config
from babelrag.evaluate.golden import GoldenQuestion
from babelrag.evaluate.metrics import recall_at
from babelrag.kb import KnowledgeBase
from babelrag.progress import progress
from babelrag.retrieve.pipeline import Searcher


def gold_availability(kb: KnowledgeBase, golden: Sequence[GoldenQuestion], k: int = 10,
                      preset: str = "default") -> dict[str, Any]:
    pages: dict[str, set[str]] = defaultdict(set)
    for passage in kb.collection.scroll():
        pages[passage.doc_id].add(passage.lang)
    kb_langs = sorted({lang for langs in pages.values() for lang in langs})
    searcher = Searcher(kb, preset_config(preset, {"k": k, "country_filter": False}))
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    recalls: dict[str, list[float]] = defaultdict(list)
    with progress("gold availability", len(golden)) as advance:
        for q in golden:
            counts[q.lang]["questions"] += 1
            available = {lang for page in q.gold_pages for lang in pages.get(page, set())}
            counts[q.lang]["any"] += bool(available)
            for lang in available:
                counts[q.lang][lang] += 1
            recalls[q.lang].append(recall_at(searcher.search(q.as_question()).evidence.doc_ids(), q.gold_pages, k))
            advance(1)
    rows = {lang: {"questions": c["questions"], "any": c["any"] / c["questions"],
                   **{d: c[d] / c["questions"] for d in kb_langs}, f"recall@{k}": sum(recalls[lang]) / len(recalls[lang])}
            for lang, c in sorted(counts.items())}
    return {"kb": kb.name, "k": k, "preset": preset, "document_languages": kb_langs, "by_question_language": rows}


def gold_markdown(report: dict[str, Any]) -> str:
    langs, k = report["document_languages"], report["k"]
    lines = [f"# Gold availability: {report['kb']}", "",
             f"Share of questions whose gold page exists in each KB language, with Recall@{k} ({report['preset']}).", "",
             "| question language | n | any | " + " | ".join(langs) + f" | Recall@{k} |", "|---" * (len(langs) + 4) + "|"]
    for lang, row in report["by_question_language"].items():
        lines.append(f"| {lang} | {row['questions']} | {row['any']:.2f} | " + " | ".join(f"{row[d]:.2f}" for d in langs)
                     + f" | {row[f'recall@{k}']:.3f} |")
    return "\n".join(lines) + "\n"
