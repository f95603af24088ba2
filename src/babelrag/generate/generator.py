"""Answer generation from a context, in the question's language, with citations.

Evidence is numbered in the prompt so the model can cite it ([2]); when it cites nothing, the
answer is attributed to the passages that contain most of it (character 3-grams), and the
answer says which of the two happened. The scored text is only what the model generated
(docs/methods.md#pitfall-echoed-prompt), with the citation markers removed.
"""
from __future__ import annotations

import re
from collections.abc import Callable

from babelrag.search_config import SearchConfig
from babelrag.generate.prompts import wording
from babelrag.lang.ngrams import char3gram_recall
from babelrag.models.llm import LLM, LLMError
from babelrag.models.structured import record
from babelrag.types import Context, ContextPassage, Question, Trace

_CITATION = re.compile(r"\[(\d{1,2})\]")
ATTRIBUTION = 0.6  # share of the answer's 3-grams a passage must hold to be credited with it


def messages_for(question: Question, context: Context, asked: str | None = None) -> list[dict[str, str]]:
    """``asked``: the query text the generator sees when it is not the question as written (DELTA's)."""
    words, asked = wording(question.lang or "en"), asked or question.text
    if not context.passages:
        return [{"role": "system", "content": words.without_docs}, {"role": "user", "content": asked}]
    system = words.with_docs + (f" {context.instruction}" if context.instruction else "")
    documents = "\n\n".join(f"[{cp.number}] {cp.text}" for cp in context.passages)
    return [{"role": "system", "content": system},
            {"role": "user", "content": f"{words.background}:\n{documents}\n\n{words.question}: {asked}"}]


def strip_citations(text: str) -> str:
    return " ".join(_CITATION.sub(" ", text).split())


def citations_of(text: str, context: Context) -> tuple[tuple[ContextPassage, ...], str]:
    by_number = {cp.number: cp for cp in context.passages}
    named = [by_number[int(n)] for n in dict.fromkeys(_CITATION.findall(text)) if int(n) in by_number]
    if named:
        return tuple(named), "cited"
    answer = strip_citations(text)
    scored = sorted(((char3gram_recall(cp.text, [answer]), cp) for cp in context.passages), key=lambda s: -s[0])
    held = tuple(cp for score, cp in scored if answer and score >= ATTRIBUTION)
    return (held[:1], "attributed") if held else ((), "none")


def generate(question: Question, context: Context, config: SearchConfig, llm: LLM, trace: Trace,
             on_text: Callable[[str], None] | None = None, asked: str | None = None) -> tuple[str, tuple, str]:
    """The raw answer (markers kept, for display), its citations and how they were found. ``llm`` is the
    generator (``Models.generator``, handed in); ``on_text`` receives the answer as it is generated
    (streaming); ``asked`` is the query the generator sees when it is not the question as written."""
    with trace.step("generate", context.strategy, passages=len(context.passages),
                    asked="question" if asked in (None, question.text) else "fused query") as step:
        messages = messages_for(question, context, asked)
        try:
            completion = llm.stream(messages, on_text, max_tokens=config.answer_tokens) if on_text else \
                llm.complete(messages, max_tokens=config.answer_tokens)
        except LLMError as error:  # no answer is an answer that scores nothing, counted as the generator's failure
            trace.fail("generate", str(error), "no answer")
            step.update(answer="", cited=[], cited_how="none")
            return "", (), "none"
        record(trace, "generator", completion)
        text = completion.text.strip()
        if not text:
            trace.fail("generate", "empty answer", "no answer")
        elif completion.stopped:  # the deadline (or a client gone) stopped it: a partial answer, said to be one
            trace.fail("generate", "cut off before its end", "the answer as far as it got")
        citations, how = citations_of(text, context)
        step.update(answer=text, cited=[cp.number for cp in citations], cited_how=how)
    return text, citations, how
