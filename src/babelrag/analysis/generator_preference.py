"""Generator language preference ([MLRS] §5.1; docs/methods.md#generator-preference): from the same evidence, the generator answers
each question in N languages; the answers are embedded (the KB's multilingual embedder) and compared
pairwise. A language whose answers agree with the others is one the generator is consistent in:
its preference is the mean of its row's off-diagonal cosines, averaged over questions."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from babelrag.concurrency import in_order
from babelrag.config import preset_config
from babelrag.context.multirag import MultiRAG
from babelrag.evaluate.golden import GoldenQuestion
from babelrag.generate.generator import generate, strip_citations
from babelrag.kb import KnowledgeBase
from babelrag.progress import progress
from babelrag.retrieve.pipeline import Searcher


def generator_preference(kb: KnowledgeBase, questions: Sequence[GoldenQuestion], langs: Sequence[str], llm: str,
                         k: int = 5, answer_tokens: int = 48, concurrency: int = 1) -> dict[str, Any]:
    config = preset_config("multirag", {"llm": llm, "k": k, "generate_k": k, "answer_tokens": answer_tokens,
                                        "country_filter": False})
    searcher = Searcher(kb, config)

    def answers_of(q: GoldenQuestion) -> list[str]:
        result = searcher.search(q.as_question())
        context = MultiRAG(searcher.models).build(result.question, result.evidence.hits[:k], config, result.trace)
        texts = []
        for lang in langs:  # the same evidence, the prompt asking for an answer in `lang`
            text, _, _ = generate(replace(result.question, lang=lang), context, config, searcher.models.generator,
                                  result.trace)
            texts.append(strip_citations(text) or "-")
        return texts

    matrices, answers = [], []
    with progress("generator preference", len(questions), "questions") as advance, \
            in_order(answers_of, questions, concurrency) as results:
        for q, texts in zip(questions, results):
            vectors = kb.embedder.embed(texts, "passage")
            matrices.append(vectors @ vectors.T)
            answers.append({"id": q.id, "answers": dict(zip(langs, texts))})
            advance(1)
    mean = np.mean(matrices, axis=0)
    off_diagonal = ~np.eye(len(langs), dtype=bool)
    preference = {lang: float(mean[i][off_diagonal[i]].mean()) for i, lang in enumerate(langs)}
    return {"kb": kb.name, "llm": llm, "questions": len(questions), "languages": list(langs),
            "similarity": {f"{a}|{b}": float(mean[i, j]) for i, a in enumerate(langs) for j, b in enumerate(langs)},
            "preference": preference, "answers": answers}
