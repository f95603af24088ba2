"""The OpenAI face as the official `openai` client sees it: typed errors carrying message, type, code and
param on every /v1 route; every usable kb:preset listed and retrievable; parameters it cannot honour
refused by name; usage and finish_reason right, streamed or not; follow-ups made standalone."""
from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from babelrag.ingest.pipeline import index_sources
from babelrag.models.llm import Completion
from babelrag.models.registry import register_llm
from babelrag.server.app import create_app
from babelrag.server.service import Service
from conftest import framework

READ = "openai-reader-0123456789"
DOCS = [{"id": "se", "text": "Apoteket säljer receptfria läkemedel i hela Sverige.", "lang": "sv", "country": "SE"},
        {"id": "pl", "text": "Apteka sprzedaje leki bez recepty w całej Polsce.", "lang": "pl", "country": "PL"}]


class Rewriting:
    """Rewrites any follow-up as the question about Poland (JSON when a schema is asked), answers "[1]"."""

    name = "openai-native-llm"
    rewrite: str | None = '{"question": "Gdzie kupię leki bez recepty w Polsce?"}'
    asked: list[str] = []

    def complete(self, messages, json_schema=None, max_tokens=256, temperature=0.0, seed=0) -> Completion:  # noqa: ANN001
        if json_schema is not None:
            return Completion(self.rewrite or "not json", 40, 12, 0.01, self.name)
        self.asked.append(messages[-1]["content"])
        return Completion("Apteka [1].", 30, 5, 0.01, self.name, finish="stop")

    def stream(self, messages, on_text, max_tokens=256, temperature=0.0, seed=0) -> Completion:  # noqa: ANN001
        completion = self.complete(messages, max_tokens=max_tokens)
        for piece in ("Apteka", " [1]."):
            on_text(piece)
        return completion


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201 - the official client on the app
    openai = framework("openai")
    folder = tmp_path_factory.mktemp("openai")
    (folder / "docs.jsonl").write_text("\n".join(json.dumps(d, ensure_ascii=False) for d in DOCS), encoding="utf-8")
    index_sources("pharma", [str(folder / "docs.jsonl")], str(folder / "store"))
    register_llm(Rewriting.name, Rewriting())
    service = Service(str(folder / "store"), folder, frozenset(), llm=Rewriting.name, read_keys=frozenset({READ}),
                      rate_limit=0)
    with TestClient(create_app(service), base_url="http://127.0.0.1") as http:
        yield openai, openai.OpenAI(base_url="http://127.0.0.1/v1", api_key=READ, http_client=http, max_retries=0), http
    register_llm(Rewriting.name, None)


def test_errors_are_typed_with_their_message(client) -> None:  # noqa: ANN001
    openai, sdk, http = client
    with pytest.raises(openai.NotFoundError) as missing:
        sdk.chat.completions.create(model="nowhere", messages=[{"role": "user", "content": "x"}])
    assert "no such knowledge base" in missing.value.message and missing.value.code == "model_not_found"
    assert missing.value.param == "model" and missing.value.type == "invalid_request_error"
    wrong = openai.OpenAI(base_url="http://127.0.0.1/v1", api_key="wrong", http_client=http, max_retries=0)
    with pytest.raises(openai.AuthenticationError) as refused:
        wrong.models.list()
    assert "valid key is required" in refused.value.message and refused.value.code == "invalid_api_key"
    with pytest.raises(openai.BadRequestError) as empty:
        sdk.chat.completions.create(model="pharma", messages=[{"role": "system", "content": "x"}])
    assert empty.value.param == "messages" and "no user message" in empty.value.message
    with pytest.raises(openai.NotFoundError) as preset:
        sdk.chat.completions.create(model="pharma:nonsense", messages=[{"role": "user", "content": "x"}])
    assert "preset" in preset.value.message
    bad_role = http.post("/v1/chat/completions", headers={"Authorization": f"Bearer {READ}"},
                         json={"model": "pharma", "messages": [{"role": "robot", "content": "x"}]})
    error = bad_role.json()["error"]
    assert bad_role.status_code == 422 and error["param"] == "messages.0.role" and "robot" not in bad_role.text
    unknown = http.get("/v1/nothing-here", headers={"Authorization": f"Bearer {READ}"})
    assert unknown.status_code == 404 and set(unknown.json()["error"]) == {"message", "type", "code", "param"}
    assert "detail" in http.get("/kbs", headers={"X-API-Key": "wrong"}).json()  # other routes keep their shape


@pytest.mark.parametrize("extra, param", [
    ({"n": 2}, "n"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}, "tools"),
    ({"response_format": {"type": "json_object"}}, "response_format"),
    ({"max_tokens": 5000}, "max_tokens"),
    ({"max_completion_tokens": 5000}, "max_completion_tokens"),
    ({"logprobs": True}, "logprobs"),
])
def test_parameters_it_cannot_honour_are_refused_by_name(client, extra: dict, param: str) -> None:  # noqa: ANN001
    openai, sdk, _ = client
    with pytest.raises(openai.BadRequestError) as refused:
        sdk.chat.completions.create(model="pharma", messages=[{"role": "user", "content": "apteka"}], **extra)
    assert refused.value.param == param and refused.value.message.endswith(refused.value.body["message"])
    assert refused.value.body["message"].startswith(f"{param}:")  # the SDK puts "Error code: 400 - " first
    assert refused.value.code == "unsupported_parameter"


def test_every_usable_preset_is_listed_and_retrievable(client) -> None:  # noqa: ANN001
    openai, sdk, _ = client
    listed = {m.id for m in sdk.models.list()}
    assert {"pharma", "pharma:learned", "pharma:chat", "pharma:delta+crossrag", "pharma:hyde"} <= listed
    assert "pharma:tuned" not in listed  # no profile: not usable here
    assert "pharma:multirag" not in listed  # that is "pharma" itself
    assert sdk.models.retrieve("pharma:learned").id == "pharma:learned"
    assert sdk.models.retrieve("pharma").owned_by == "babelrag"
    for missing in ("pharma:tuned", "pharma:nonsense", "nowhere"):
        with pytest.raises(openai.NotFoundError):
            sdk.models.retrieve(missing)


def test_usage_and_finish_reason_streamed_or_not(client) -> None:  # noqa: ANN001
    _, sdk, _ = client
    asked = [{"role": "user", "content": "Gdzie kupię leki bez recepty?"}]
    reply = sdk.chat.completions.create(model="pharma", messages=asked, extra_body={"country": "PL"})
    assert reply.choices[0].finish_reason == "stop" and len(reply.choices) == 1
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens, reply.usage.total_tokens) == (30, 5, 35)
    cut = sdk.chat.completions.create(model="pharma", messages=asked, max_tokens=5, extra_body={"country": "PL"})
    assert cut.choices[0].finish_reason == "stop"  # the backend said it stopped: its budget did not cut it
    chunks = list(sdk.chat.completions.create(model="pharma", messages=asked, stream=True,
                                              stream_options={"include_usage": True}))
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == 35
    assert chunks[-2].choices[0].finish_reason == "stop" and chunks[-2].usage is None
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Apteka [1]."
    plain = list(sdk.chat.completions.create(model="pharma", messages=asked, stream=True))
    assert plain[-1].choices[0].finish_reason == "stop" and plain[-1].usage.completion_tokens == 5


def test_a_follow_up_is_made_standalone_before_retrieval(client) -> None:  # noqa: ANN001
    _, sdk, _ = client
    turns = [{"role": "user", "content": "Var köper jag receptfria läkemedel i Sverige?"},
             {"role": "assistant", "content": "På Apoteket [1]."}, {"role": "user", "content": "A w Polsce?"}]
    Rewriting.asked.clear()
    reply = sdk.chat.completions.create(model="pharma", messages=turns)
    assert "Gdzie kupię leki bez recepty w Polsce?" in Rewriting.asked[-1]  # the generator got the rewrite
    assert reply.model_extra["citations"][0]["id"] == "pl" and reply.model_extra["warnings"] == []
    assert reply.usage.completion_tokens == 12 + 5  # the rewrite is paid for too
    Rewriting.rewrite = None  # the model fails twice: the last turn is searched, with a warning
    try:
        fallback = sdk.chat.completions.create(model="pharma", messages=turns)
    finally:
        Rewriting.rewrite = '{"question": "Gdzie kupię leki bez recepty w Polsce?"}'
    assert "A w Polsce?" in Rewriting.asked[-1]
    assert fallback.model_extra["warnings"][0].startswith("conversation failed")


def test_ask_and_ask_stream_make_a_follow_up_standalone_too(client) -> None:  # noqa: ANN001
    import babelrag

    _, _, http = client
    history = [{"role": "user", "content": "Var köper jag receptfria läkemedel i Sverige?"}]
    answered = http.post("/ask", headers={"X-API-Key": READ},
                         json={"kb": "pharma", "question": "A w Polsce?", "history": history}).json()
    rewrite = next(s for s in answered["trace"]["steps"] if s["stage"] == "conversation")
    assert rewrite["data"]["asked"] == "A w Polsce?"
    assert rewrite["data"]["standalone"] == "Gdzie kupię leki bez recepty w Polsce?"
    assert answered["citations"][0]["id"] == "pl"
    with babelrag.open_kb("pharma", http.app.state.service.store.location) as kb:
        *pieces, answer = kb.ask_stream("A w Polsce?", history=history, llm=Rewriting.name)
    assert "".join(pieces) == "Apteka [1]." and answer.question.text == "Gdzie kupię leki bez recepty w Polsce?"
    assert answer.trace.steps[0].stage == "conversation"  # the rewrite first, then the search it fed
