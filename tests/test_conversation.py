"""A follow-up made standalone: the rewrite on the trace, the user's language, and a rewrite that cannot
stand for the last turn (invalid twice, dropping what the user just asked, running away) as a traced
failure with the last turn searched instead."""
from __future__ import annotations

import pytest

from babelrag.generate.conversation import LLMCondenser, turns_of
from babelrag.lang.detect import detector
from babelrag.types import Question, Trace
from conftest import Scripted

SWEDEN = [("user", "Var köper jag receptfria läkemedel i Sverige?"), ("assistant", "På Apoteket [1].")]


def condensed(reply: str, question: str = "Och i Polen?") -> tuple[Question, Trace, Scripted]:
    model = Scripted("rewriter", lambda messages: reply)
    trace = Trace()
    return LLMCondenser(model, detector(None)).standalone(Question(question), SWEDEN, trace), trace, model


def test_the_rewrite_is_searched_in_the_users_language() -> None:
    question, trace, model = condensed('{"question": "Var köper jag receptfria läkemedel i Polen?"}')
    assert question.text == "Var köper jag receptfria läkemedel i Polen?" and question.lang == "sv"
    assert question.metadata["asked"] == "Och i Polen?" and not trace.failures and model.calls == 1
    step = trace.steps[0]
    assert (step.stage, step.data["asked"], step.data["standalone"]) == ("conversation", "Och i Polen?",
                                                                         question.text)
    assert "Swedish" in LLMCondenser(model, None).messages("Och i Polen?", SWEDEN, "sv")[0]["content"]


@pytest.mark.parametrize("reply, reason", [
    ("not json at all", "invalid JSON twice"),
    ('{"question": "Var köper jag receptfria läkemedel i Sverige?"}', "dropped what the last turn asks"),
    ('{"question": "Var i Polen ' + " ".join(f"ord{i}" for i in range(30)) + '?"}', "longer than the turns"),
])
def test_a_rewrite_that_cannot_stand_for_the_turn_falls_back(reply: str, reason: str) -> None:
    question, trace, _ = condensed(reply)
    assert question.text == "Och i Polen?" and question.lang == "sv"  # the last turn, still in the user's language
    assert [f.stage for f in trace.failures] == ["conversation"] and reason in trace.failures[0].reason
    assert trace.warnings()[0].endswith("searched the last turn as written")
    assert trace.steps[0].data["standalone"] is None


def test_turns_come_from_chat_messages_or_pairs() -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": " Hej "},
                {"role": "assistant", "content": ""}, ("assistant", "Hej!"), {"role": "tool", "content": "x"}]
    assert turns_of(messages) == [("user", "Hej"), ("assistant", "Hej!")]
    assert LLMCondenser(Scripted("unused", lambda m: ""), None).standalone(Question("Hej"), [], Trace()).text == "Hej"


def test_the_rewriting_model_is_the_configured_one(tmp_path, scripted) -> None:  # noqa: ANN001
    import babelrag

    rewriter = scripted(lambda messages: '{"question": "Gdzie kupię leki bez recepty w Polsce?"}')
    answering = scripted(lambda messages: "Apteka [1].")
    babelrag.index("pharma", [{"id": "pl", "text": "Apteka sprzedaje leki bez recepty w całej Polsce.", "lang": "pl",
                               "country": "PL"}], store=str(tmp_path / "store"))
    with babelrag.open_kb("pharma", str(tmp_path / "store")) as kb:
        answer = kb.ask("A w Polsce?", history=SWEDEN, llm=answering, settings={"conversation_llm": rewriter})
    calls = [(call.role, call.model) for call in answer.trace.llm_calls]
    assert calls[0] == ("conversation", rewriter) and ("generator", answering) in calls
