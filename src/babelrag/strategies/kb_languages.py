"""Search in the knowledge base's languages, not the user's (docs/methods.md#kb-languages, the [BLOG] chat configuration).

Target languages come from the KB side: the languages its passages are written in for the
question's country (plus global passages), the pivot first, then the question's own language when
the KB holds it (no translation), then by passage count, capped by ``max_paths`` — or, under a
tuned profile, the KB languages whose paths found the gold most often for this question language
on dev (``kb_targets``). The
question is translated into all of them in one LLM call; each translation is a path over the
whole KB (with the country filter), and the paths are max-merged by reranker score.
An Indonesian question about Sweden yields en + sv paths: no page is Indonesian.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from babelrag.models.bundle import Models
from babelrag.registry import STRATEGIES, Facts
from babelrag.search_config import SearchConfig
from babelrag.models.translate import translate_many
from babelrag.strategies.scope import kb_languages, path_filter
from babelrag.types import Question, SearchRequest, Trace

if TYPE_CHECKING:
    from babelrag.kb import KnowledgeBase


class KBLanguagesParams(BaseModel):
    """Which KB-language paths, and how many."""

    max_paths: int = Field(3, ge=1, le=10)
    kb_paths: Literal["all", "pivot", "local"] = "all"
    kb_targets: tuple[str, ...] = ()


# one call for every language, and one more for each that came back in another language (max_paths 3)
@STRATEGIES.register("kb_languages", params=KBLanguagesParams,
                     facts=Facts(paths="several", llm_calls_per_question=4, client_choosable=True,
                                 trace_stages=("translate",)),
                     about="the question translated into the KB's languages, one path each")
class KBLanguages:
    name = "kb_languages"

    def __init__(self, models: Models):
        self.models = models

    def plan(self, question: Question, kb: KnowledgeBase, config: SearchConfig, trace: Trace) -> list[SearchRequest]:
        country = question.country if config.country_filter else None
        manifest = kb.manifest
        measured = [t for t in config.kb_targets if t in kb_languages(manifest, country, config.pivot)]
        targets = (measured or kb_languages(manifest, country, config.pivot, question.lang))[:config.max_paths]
        if config.kb_paths == "pivot":
            targets = [t for t in targets if t == config.pivot] or targets[:1]
        elif config.kb_paths == "local":
            targets = [t for t in targets if t != config.pivot] or targets[:1]
        if not targets:  # no KB language for this country (an unknown one): nothing to translate into
            return []
        with trace.step("translate", self.name, src=question.lang, targets=targets) as record:
            result = translate_many(self.models.translator, question.text, question.lang or "",
                                    targets, trace)
            record.update(texts=result.texts, failed=result.failed)
        for target, reason in result.failed.items():
            trace.fail("translate", f"{question.lang}→{target}: {reason}", f"kb:{target} path dropped")
        flt = path_filter(question, config, kb)
        requests, seen = [], set()
        for target in targets:
            text = result.texts.get(target)
            if text is None or text in seen:  # two languages, one text: a second path cannot change a max-merge
                continue
            seen.add(text)
            requests.append(SearchRequest(text, kb.name, target, flt, f"kb:{target}",
                                          origin="as_written" if text == question.text else "translated"))
        if result.failed and question.text not in seen:  # a lost translation: the question as written stands in
            requests.append(SearchRequest(question.text, kb.name, question.lang, flt, "as_written"))
        return requests
