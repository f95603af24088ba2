"""Conversations: a follow-up turn turned into a standalone question before anything is retrieved.

A knowledge base is searched with one question, and a follow-up alone ("Och i Polen?" after a question
about Sweden) names nothing worth searching: it was answered by echoing itself. A ``Condenser`` turns the
recent turns into one question that stands alone, in the user's language. ``LLMCondenser`` has the
configured model rewrite it as JSON constrained at decoding (``complete_json``); a rewrite that cannot
be used — invalid JSON twice, an empty or looping question, the model unreachable — is a failure on the
trace and the last turn is searched as written, so a conversation never fails because of its rewrite.
A rewrite is checked before it is searched, like a translation: one that keeps less than half of the
words the last turn adds to the conversation dropped what the user just asked (the 1.5B model often
handed back the earlier question unchanged after "Und Jacksonville?"), and one longer than the turns it
comes from together ran away; either is a failure, and the last turn is searched. The trace's
``conversation`` step shows what was asked and what was searched.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from pydantic import BaseModel, Field

from babelrag.lang.detect import LanguageDetector
from babelrag.lang.languages import language_name
from babelrag.models.llm_types import LLM, LLMError
from babelrag.models.loops import loops
from babelrag.models.structured import complete_json
from babelrag.types import Question, Trace

Turn = tuple[str, str]  # (role: "user" | "assistant", text)
ROLES = ("user", "assistant")
TURN_CHARS = 600  # of each earlier turn the rewriter reads: what a follow-up refers to is near its start
FALLBACK = "searched the last turn as written"
KEPT = 0.5  # share of the last turn's new words a rewrite must keep
_WORD = re.compile(r"\w{3,}")


def problem_of(rewrite: str, question: str, history: Sequence[Turn]) -> str:
    """Why a rewrite cannot stand for the last turn ("" when it can): empty or looping, longer than the
    turns it comes from together, or keeping less than half of the words the last turn adds."""
    if not rewrite or loops(rewrite, ""):
        return "an empty or looping question"
    if len(rewrite) > len(question) + max((len(text) for _, text in history), default=0) + 40:
        return "a question longer than the turns it comes from"
    said = {word.casefold() for _, text in history for word in _WORD.findall(text)}
    new = {word.casefold() for word in _WORD.findall(question)} - said
    kept = new & {word.casefold() for word in _WORD.findall(rewrite)}
    if new and len(kept) < KEPT * len(new):
        return "the rewrite dropped what the last turn asks"
    return ""


class Condenser(Protocol):
    """``standalone(question, history, trace)``: the question as it reads without the conversation."""

    name: str

    def standalone(self, question: Question, history: Sequence[Turn], trace: Trace) -> Question: ...


class Standalone(BaseModel):
    """The rewriter's answer: its schema constrains decoding, so a small model cannot wander off it."""

    question: str = Field(min_length=1, max_length=600)


def turns_of(history: Iterable[Mapping[str, object] | Sequence[str]]) -> list[Turn]:
    """Earlier turns as ``(role, text)``, from chat messages (``{"role", "content"}``) or pairs; system
    and tool messages and empty turns are left out (they say nothing about what the user asks)."""
    turns = []
    for item in history:
        role, text = (item.get("role"), item.get("content")) if isinstance(item, Mapping) else tuple(item)
        if role in ROLES and isinstance(text, str) and text.strip():
            turns.append((str(role), text.strip()))
    return turns


class LLMCondenser:
    """The model (handed in) rewrites the last turn from the ``turns`` before it."""

    name = "llm"

    def __init__(self, llm: LLM, detect: LanguageDetector | None = None, turns: int = 6, max_tokens: int = 96):
        self.llm, self.detect, self.turns, self.max_tokens = llm, detect, turns, max_tokens

    def _language(self, question: Question, history: Sequence[Turn]) -> str | None:
        """The user's language: given, or detected over the user's turns (a follow-up of three words is
        too short to identify alone)."""
        if question.lang or self.detect is None:
            return question.lang
        said = " ".join([text for role, text in history if role == "user"][-self.turns:] + [question.text])
        return self.detect.detect(said)[0]

    def messages(self, question: str, history: Sequence[Turn], lang: str | None) -> list[dict[str, str]]:
        language = language_name(lang) if lang else "the language of the user's messages"
        system = ("Rewrite the user's last message as one standalone question that can be understood without "
                  "the conversation. Replace pronouns and short follow-ups with what they refer to in the earlier "
                  "turns, and keep whatever the last message changes (a new place, person or thing replaces the "
                  f"earlier one). Write the question in {language}. Do not answer it. "
                  'Reply with JSON: {"question": "..."}')
        said = "\n".join(f"{role.capitalize()}: {text[:TURN_CHARS]}" for role, text in history)
        return [{"role": "system", "content": system},
                {"role": "user", "content": f"Conversation:\n{said}\n\nLast message: {question}"}]

    def standalone(self, question: Question, history: Sequence[Turn], trace: Trace) -> Question:
        recent = list(history)[-self.turns:]
        if not recent:
            return question
        lang = self._language(question, recent)
        with trace.step("conversation", self.name, turns=len(recent), lang=lang, asked=question.text) as step:
            try:
                text = complete_json(self.llm, self.messages(question.text, recent, lang), Standalone,
                                     role="conversation", trace=trace, max_tokens=self.max_tokens).question.strip()
                problem = problem_of(text, question.text, recent)
            except LLMError as error:
                text, problem = "", str(error)
            if problem:
                trace.fail("conversation", problem, FALLBACK)
                step.update(standalone=None, rewrite=text)
                return replace(question, lang=lang)
            step["standalone"] = text
        return replace(question, text=text, lang=lang, metadata={**question.metadata, "asked": question.text})
