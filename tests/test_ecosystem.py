"""Meeting users where they are: the public Python API, the OpenAI-compatible chat endpoint driven by the
official `openai` client over loopback (streaming included), and copying a KB between stores."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import babelrag
from babelrag import deadline
from conftest import ThreadedServer, framework
from babelrag.config import preset_config
from babelrag.errors import KBExists
from babelrag.kb import KnowledgeBase, copy_kb
from babelrag.models.llm import Completion
from babelrag.models.registry import register_llm
from babelrag.retrieve.pipeline import Searcher
from babelrag.server.app import create_app
from babelrag.server.service import Service
from babelrag.store import journal
from babelrag.store.base import open_store
from babelrag.store.schema import spec_of

DOCS = [{"id": "se", "text": "Apoteket säljer receptfria läkemedel i hela Sverige.", "lang": "sv", "country": "SE"},
        {"id": "se-en", "text": "Swedish pharmacies sell over-the-counter medicines.", "lang": "en", "country": "SE"},
        {"id": "pl", "text": "Apteka sprzedaje leki bez recepty w całej Polsce.", "lang": "pl", "country": "PL"}]


class Citing:
    """A generator that answers from passage [1], in pieces (so streaming has something to stream); asked
    for JSON (a follow-up made standalone), it names the question about Sweden."""

    name = "citing-generator"
    prompts: list[str] = []
    STANDALONE = "Var köper jag receptfria läkemedel i Sverige?"

    def complete(self, messages, json_schema=None, max_tokens=256, temperature=0.0, seed=0) -> Completion:  # noqa: ANN001
        if json_schema is not None:
            return Completion(json.dumps({"question": self.STANDALONE}, ensure_ascii=False), 50, 10, 0.01, self.name)
        self.prompts.append("\n".join(m["content"] for m in messages))
        return Completion("Apoteket [1].", 30, 4, 0.01, self.name)

    def stream(self, messages, on_text, max_tokens=256, temperature=0.0, seed=0) -> Completion:  # noqa: ANN001
        completion = self.complete(messages)
        for piece in ("Apoteket", " [1]", "."):
            on_text(piece)
        return completion


class Broken(Citing):
    """A generator that fails in a way nobody planned for (a bug, not a model failure)."""

    name = "broken-generator"

    def stream(self, messages, on_text, max_tokens=256, temperature=0.0, seed=0) -> Completion:  # noqa: ANN001
        on_text("Apo")
        raise RuntimeError("a bug")


class Endless(Citing):
    """Streams until told to stop, checking the deadline between pieces as the real backends do."""

    name = "endless-generator"
    stopped_after: list[int] = []

    def stream(self, messages, on_text, max_tokens=256, temperature=0.0, seed=0) -> Completion:  # noqa: ANN001
        for sent in range(5000):
            if (left := deadline.remaining()) is not None and left <= 0:
                break
            on_text("x")
            time.sleep(0.002)
        self.stopped_after.append(sent)
        return Completion("x" * sent, 30, sent, 0.01, self.name, stopped=sent < 4999)  # as real backends say


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("api")
    babelrag.index("pharma", DOCS, store=str(folder / "store"))
    return str(folder / "store")


@pytest.fixture(scope="module")
def citing():  # noqa: ANN201
    register_llm(Citing.name, Citing())
    register_llm(Broken.name, Broken())
    register_llm(Endless.name, Endless())
    yield Citing.name
    register_llm(Citing.name, None)
    register_llm(Broken.name, None)
    register_llm(Endless.name, None)


def test_the_python_api(store: str, citing: str) -> None:
    with babelrag.open_kb("pharma", store) as kb:
        assert kb.languages == {"sv": 1, "en": 1, "pl": 1} and kb.countries == ["PL", "SE"]
        result = kb.search("Var köper jag receptfria läkemedel?", country="SE")
        assert isinstance(result, babelrag.SearchResult) and result.evidence.doc_ids()[0] == "se"
        assert {h.passage.country for h in result.evidence.hits} == {"SE"}
        answer = kb.ask("Var köper jag receptfria läkemedel?", country="SE", llm=citing)
        assert isinstance(answer, babelrag.Answer) and answer.citations[0].passage.id == "se"
        pieces = list(kb.ask_stream("Var köper jag receptfria läkemedel?", country="SE", llm=citing))
        assert pieces[:3] == ["Apoteket", " [1]", "."] and isinstance(pieces[-1], babelrag.Answer)
        report = kb.index([{"id": "pl-en", "text": "Polish pharmacies sell medicines.", "lang": "en", "country": "PL"}])
        assert report.documents == 1 and kb.languages["en"] == 2
        assert kb.search("Polish pharmacies", country="PL", k=1).evidence.doc_ids() == ["pl-en"]
    assert {"index", "open_kb", "KB", "PRESETS"} <= set(babelrag.__all__)


def test_a_stream_the_caller_leaves_stops_generating(store: str, citing: str) -> None:
    with babelrag.open_kb("pharma", store) as kb:
        pieces = kb.ask_stream("Var köper jag receptfria läkemedel?", country="SE", llm=Endless.name)
        assert [next(pieces) for _ in range(3)] == ["x", "x", "x"]
        pieces.close()  # the caller has what it wanted
        for _ in range(200):
            if Endless.stopped_after:
                break
            time.sleep(0.01)
        assert Endless.stopped_after and Endless.stopped_after[0] < 1000  # not the 5,000 it would have made


def test_an_answer_cut_by_the_deadline_says_so(store: str, citing: str) -> None:
    from babelrag.server.routes.openai import finish_reason

    with babelrag.open_kb("pharma", store) as kb, deadline.limit(1.0):
        *pieces, answer = kb.ask_stream("Var köper jag receptfria läkemedel?", country="SE", llm=Endless.name)
    assert 0 < len(pieces) < 4999 and answer.text == "x" * len(pieces)
    assert [f.stage for f in answer.trace.failures] == ["generate"]  # a partial answer, counted as one
    assert "cut off before its end" in answer.trace.warnings()[0]
    assert answer.trace.llm_calls[-1].finish == "stopped"
    assert finish_reason(answer, 10_000) == "length"  # far from its budget, and still incomplete


@pytest.mark.slow
def test_the_openai_client_gets_cited_answers_streamed_or_not(store: str, citing: str, tmp_path: Path) -> None:
    openai = framework("openai")
    copy = tmp_path / "served"  # the module's store stays with the API test
    babelrag.index("pharma", DOCS, store=str(copy))
    service = Service(str(copy), tmp_path, frozenset({"k" * 20}), llm=citing, read_keys=frozenset({"r" * 20}))
    with ThreadedServer(create_app(service)) as base:
        with pytest.raises(openai.AuthenticationError):  # reads need a key here: the SDK's api_key is it
            openai.OpenAI(base_url=f"{base}/v1", api_key="wrong").models.list()
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="r" * 20)
        listed = [m.id for m in client.models.list()]
        assert {"pharma", "pharma:chat"} <= set(listed)
        history = [{"role": "system", "content": "You are helpful."},
                   {"role": "user", "content": "Hej!"}, {"role": "assistant", "content": "Hej! Vad undrar du?"},
                   {"role": "user", "content": "Var köper jag receptfria läkemedel?"}]
        Citing.prompts.clear()
        reply = client.chat.completions.create(model="pharma", messages=history, extra_body={"country": "SE"})
        asked = Citing.prompts[-1]  # the standalone question is asked; earlier turns are not sent on
        assert Citing.STANDALONE in asked and "Hej!" not in asked
        assert reply.choices[0].message.content == "Apoteket [1]."
        cited = reply.model_extra["citations"]
        assert cited[0]["number"] == 1 and cited[0]["id"] == "se" and cited[0]["lang"] == "sv"
        # the rewrite's 10 tokens and the answer's 4: usage counts every model call the answer made
        assert reply.usage.completion_tokens == 14 and reply.choices[0].finish_reason == "stop"
        cut = client.chat.completions.create(model="pharma", messages=history, max_tokens=4,
                                             extra_body={"country": "SE"})
        assert cut.choices[0].finish_reason == "length"  # the whole budget used: the client knows it was cut
        streamed_cut = list(client.chat.completions.create(model="pharma", messages=history, max_tokens=4, stream=True,
                                                           extra_body={"country": "SE"}))
        assert streamed_cut[-1].choices[0].finish_reason == "length"
        stream = client.chat.completions.create(model="pharma", messages=history, stream=True,
                                                extra_body={"country": "SE"})
        chunks = list(stream)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == "Apoteket [1]." and chunks[-1].choices[0].finish_reason == "stop"
        assert chunks[-1].model_extra["citations"][0]["id"] == "se"
        service.llm = Broken.name  # a bug mid-stream ends the stream with an error, never a quiet [DONE]
        broken = client.chat.completions.create(model="pharma", messages=history, stream=True)
        with pytest.raises(openai.APIError, match="internal error"):
            list(broken)
        service.llm = citing
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="nowhere", messages=history)
        with pytest.raises(openai.BadRequestError):
            client.chat.completions.create(model="pharma", messages=[{"role": "system", "content": "x"}])
    service.close()


@pytest.mark.parametrize("target", ["edge", ":memory:"])
def test_a_kb_copied_between_stores_answers_identically(store: str, tmp_path: Path, target: str) -> None:
    destination = open_store(str(tmp_path / "copy") if target == "edge" else ":memory:")
    config = preset_config("learned")
    with KnowledgeBase.open("pharma", store) as source:
        with copy_kb(source, destination, "pharma-copy", batch=2) as copied:  # several pages
            for question in ["Var köper jag receptfria läkemedel?", "Polish pharmacies", "leki bez recepty"]:
                mine = Searcher(source, config).search(question).evidence
                theirs = Searcher(copied, config).search(question).evidence
                assert [(h.passage.id, round(h.score, 4)) for h in mine.hits] == \
                    [(h.passage.id, round(h.score, 4)) for h in theirs.hits] and mine.hits
            assert copied.manifest.kb == "pharma-copy" and destination.list() == ["pharma-copy"]
            assert copied.manifest.passages == source.manifest.passages
            assert copied.manifest.languages == source.manifest.languages
        with pytest.raises(KBExists, match="already exists"):  # a complete copy is never overwritten (typed: the CLI
            # prints it as one line; still a FileExistsError for callers that catch that)
            copy_kb(source, destination, "pharma-copy")


def test_an_interrupted_copy_is_never_served_and_can_be_redone(store: str, tmp_path: Path) -> None:
    destination = open_store(str(tmp_path / "copy"))
    with KnowledgeBase.open("pharma", store) as source:
        real_upsert = type(source.collection).upsert
        calls = []

        def dies_on_the_second_page(collection, points):  # noqa: ANN001, ANN202
            calls.append(len(points))
            if len(calls) == 2:
                raise KeyboardInterrupt  # as a Ctrl-C midway would
            return real_upsert(collection, points)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(type(source.collection), "upsert", dies_on_the_second_page)
            with pytest.raises(KeyboardInterrupt):
                copy_kb(source, destination, "half", batch=1)
        assert destination.list() == []  # the partial copy was dropped
        unfinished = destination.create("half", spec_of(source.manifest.stored()), dict(source.manifest.stored(), kb="half"),
                                        journal.creating())  # a copy killed before it could drop itself
        unfinished.upsert(list(source.collection.points())[:1])
        unfinished.close()
        with copy_kb(source, destination, "half") as redone:  # replaces the unfinished one
            assert redone.manifest.passages == source.manifest.passages


def test_a_haystack_pipeline_retrieves_from_a_kb(store: str) -> None:
    haystack = framework("haystack")
    from haystack.components.builders import PromptBuilder

    from babelrag.integrations.haystack import BabelragRetriever

    pipeline = haystack.Pipeline()
    pipeline.add_component("retriever", BabelragRetriever(kb="pharma", store=store, preset="learned", top_k=2))
    pipeline.add_component("prompt", PromptBuilder("{% for d in documents %}[{{ d.meta.lang }}] {{ d.content }}\n"
                                                   "{% endfor %}Q: {{ query }}", required_variables=["documents"]))
    pipeline.connect("retriever.documents", "prompt.documents")
    question = "Var köper jag receptfria läkemedel?"
    result = pipeline.run({"retriever": {"query": question, "country": "SE"}, "prompt": {"query": question}},
                          include_outputs_from={"retriever"})
    documents = result["retriever"]["documents"]
    assert [d.id for d in documents][0] == "se" and {d.meta["country"] for d in documents} == {"SE"}
    assert documents[0].score > documents[1].score and documents[0].meta["lang"] == "sv"
    assert result["prompt"]["prompt"].startswith("[sv] Apoteket säljer")
    restored = haystack.Pipeline.loads(pipeline.dumps(), allowed_modules=["babelrag.integrations.haystack"])
    assert restored.get_component("retriever").preset == "learned"
    pipeline.get_component("retriever").close()


def test_a_llama_index_query_engine_retrieves_from_a_kb(store: str) -> None:
    framework("llama_index.core")
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine

    from babelrag.integrations.llama_index import BabelragRetriever

    with babelrag.open_kb("pharma", store) as kb:
        retriever = BabelragRetriever(kb, preset="learned", top_k=2, country="PL")
        engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM(max_tokens=8))
        response = engine.query("Gdzie kupię leki bez recepty?")
        nodes = response.source_nodes
        assert nodes[0].node.node_id == "pl" and nodes[0].node.metadata["lang"] == "pl"
        assert {n.node.metadata["country"] for n in nodes} == {"PL"}
        assert [n.score for n in nodes] == sorted((n.score for n in nodes), reverse=True)
