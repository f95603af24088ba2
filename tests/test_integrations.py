"""The integrations as their frameworks expect them, each against the real framework: Haystack filters,
run_async and a document writer; LlamaIndex async retrieval off the event loop, MetadataFilters, model text
without bookkeeping, ref_doc_id and a vector store; the async Python API."""
from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

import babelrag
from babelrag.errors import ConfigError
from conftest import framework

DOCS = [{"id": "se", "text": "Apoteket säljer receptfria läkemedel i hela Sverige.", "lang": "sv", "country": "SE",
         "doc_id": "pharmacy-se"},
        {"id": "se-en", "text": "Swedish pharmacies sell over-the-counter medicines.", "lang": "en", "country": "SE",
         "doc_id": "pharmacy-se"},
        {"id": "pl", "text": "Apteka sprzedaje leki bez recepty w całej Polsce.", "lang": "pl", "country": "PL",
         "doc_id": "pharmacy-pl"},
        {"id": "eu", "text": "Medicines bought in one EU country may be used in another.", "lang": "en",
         "scope": "global", "doc_id": "eu-rules"}]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("integrations")
    babelrag.index("pharma", DOCS, store=str(folder / "store"))
    return str(folder / "store")


def searched_on(monkeypatch: pytest.MonkeyPatch) -> list[threading.Thread]:
    """Records the thread every ``KB.search`` runs on."""
    threads: list[threading.Thread] = []
    real = babelrag.KB.search

    def search(self, *args, **kwargs):  # noqa: ANN001, ANN202
        threads.append(threading.current_thread())
        return real(self, *args, **kwargs)

    monkeypatch.setattr(babelrag.KB, "search", search)
    return threads


def test_haystack_filters_map_to_country_language_scope_and_pages(store: str) -> None:
    framework("haystack")
    from babelrag.integrations.haystack import BabelragRetriever

    retriever = BabelragRetriever(kb="pharma", store=store, top_k=4)
    question = "Where can I buy medicines without a prescription?"

    def ids(filters: dict) -> list[str]:
        return sorted(d.id for d in retriever.run(question, filters=filters)["documents"])

    assert ids({"field": "meta.lang", "operator": "in", "value": ["pl", "sv"]}) == ["pl", "se"]
    assert ids({"field": "meta.country", "operator": "==", "value": "pl"}) == ["eu", "pl"]  # plus global ones
    assert ids({"operator": "AND", "conditions": [{"field": "meta.country", "operator": "==", "value": "SE"},
                                                  {"field": "meta.scope", "operator": "==", "value": "local"}]}) \
        == ["se", "se-en"]
    assert ids({"field": "meta.doc_id", "operator": "==", "value": "eu-rules"}) == ["eu"]
    with pytest.raises(ConfigError, match="only AND"):
        retriever.run(question, filters={"operator": "OR", "conditions": []})
    with pytest.raises(ConfigError, match="no filter on 'meta_year'"):
        retriever.run(question, filters={"field": "meta.meta_year", "operator": "==", "value": 1})
    with pytest.raises(ConfigError, match="lang takes == or in"):
        retriever.run(question, filters={"field": "meta.lang", "operator": ">", "value": "en"})
    retriever.close()


def test_haystack_run_async_and_a_writer_in_a_pipeline(store: str, tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    haystack = framework("haystack")
    from babelrag.integrations.haystack import BabelragDocumentWriter, BabelragRetriever

    target = str(tmp_path / "written")
    writer = BabelragDocumentWriter(kb="written", store=target)
    written = writer.run(documents=[
        haystack.Document(id="a", content="Apoteket säljer receptfria läkemedel.",
                          meta={"lang": "sv", "country": "se", "doc_id": "page-a", "team": "pharma"}),
        haystack.Document(id="b", content="Apteka sprzedaje leki bez recepty.", meta={"lang": "pl", "country": "PL"})])
    assert written == {"documents_written": 2}
    restored = haystack.Pipeline.loads(_pipeline(haystack, writer).dumps(),
                                       allowed_modules=["babelrag.integrations.haystack"])
    assert restored.get_component("writer").kb == "written"
    threads = searched_on(monkeypatch)
    retriever = BabelragRetriever(kb="written", store=target, top_k=1)
    found = asyncio.run(retriever.run_async("Var köper jag läkemedel?", country="SE"))["documents"]
    assert [d.id for d in found] == ["a"] and found[0].meta["team"] == "pharma"
    assert found[0].meta["doc_id"] == "page-a" and found[0].meta["country"] == "SE"
    assert threads and threads[0] is not threading.main_thread()  # off the event loop's thread
    retriever.close()


def _pipeline(haystack, writer):  # noqa: ANN001, ANN202
    pipeline = haystack.Pipeline()
    pipeline.add_component("writer", writer)
    return pipeline


def test_llama_index_nodes_async_filters_and_model_text(store: str, monkeypatch) -> None:  # noqa: ANN001
    framework("llama_index.core")
    from llama_index.core.schema import MetadataMode
    from llama_index.core.vector_stores import FilterCondition, MetadataFilter, MetadataFilters

    from babelrag.integrations.llama_index import BabelragRetriever

    only_polish = MetadataFilters(filters=[MetadataFilter(key="lang", value=["pl"], operator="in")])
    first = BabelragRetriever("pharma", store, top_k=2, filters=only_polish)
    second = BabelragRetriever("pharma", store, top_k=2, country="SE")  # two handles on one KB, one process
    threads = searched_on(monkeypatch)
    nodes = asyncio.run(first.aretrieve("Where can I buy medicines?"))
    assert [n.node.node_id for n in nodes] == ["pl"] and threads[0] is not threading.main_thread()
    node = second.retrieve("Var köper jag receptfria läkemedel?")[0].node
    assert node.ref_doc_id == "pharmacy-se"
    seen_by_model = node.get_content(metadata_mode=MetadataMode.LLM)
    assert "lang: sv" in seen_by_model and "country: SE" in seen_by_model
    assert not any(f"{key}:" in seen_by_model for key in ("record_id", "path", "chunk", "source", "doc_id"))
    assert "record_id" not in node.get_content(metadata_mode=MetadataMode.EMBED)
    assert node.metadata["record_id"] == "se"  # still there for code
    with pytest.raises(ConfigError, match="only AND"):
        BabelragRetriever("pharma", store, filters=MetadataFilters(filters=[], condition=FilterCondition.OR))
    first.close()
    second.close()


def test_llama_index_vector_store_indexes_nodes_as_they_are(tmp_path: Path) -> None:
    framework("llama_index.core")
    from llama_index.core import Document, MockEmbedding, VectorStoreIndex
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.vector_stores import MetadataFilter, MetadataFilters, VectorStoreQuery

    from babelrag.integrations.llama_index import BabelragVectorStore

    vector_store = BabelragVectorStore(kb="nodes", store=str(tmp_path / "store"))
    documents = [Document(text="Apoteket säljer receptfria läkemedel i hela Sverige.", doc_id="page-se",
                          metadata={"lang": "sv", "country": "SE"}),
                 Document(text="Apteka sprzedaje leki bez recepty w całej Polsce.", doc_id="page-pl",
                          metadata={"lang": "pl", "country": "PL"})]
    nodes = SentenceSplitter().get_nodes_from_documents(documents)
    assert sorted(vector_store.add(nodes)) == sorted(n.node_id for n in nodes)
    polish = MetadataFilters(filters=[MetadataFilter(key="country", value="PL")])
    result = vector_store.query(VectorStoreQuery(query_str="leki bez recepty", similarity_top_k=1, filters=polish))
    assert [n.ref_doc_id for n in result.nodes] == ["page-pl"] and len(result.similarities) == 1
    # through LlamaIndex's own index: the query is babelrag's to embed (the mock embedder is never asked)
    index = VectorStoreIndex.from_vector_store(vector_store, embed_model=MockEmbedding(embed_dim=8))
    assert [n.node.ref_doc_id for n in index.as_retriever(similarity_top_k=1).retrieve("läkemedel i Sverige")] \
        == ["page-se"]
    vector_store.delete("page-pl")
    assert vector_store.client.manifest["documents"] == 1
    vector_store.close()


def test_the_async_python_api(store: str, scripted, monkeypatch) -> None:  # noqa: ANN001
    answering = scripted(lambda messages: "Apoteket [1].")
    threads = searched_on(monkeypatch)

    async def use() -> tuple:
        with babelrag.open_kb("pharma", store) as kb:
            result = await kb.asearch("Var köper jag receptfria läkemedel?", country="SE", k=1)
            answer = await kb.aask("Var köper jag receptfria läkemedel?", country="SE", llm=answering)
            pieces = [piece async for piece in kb.aask_stream("Var köper jag receptfria läkemedel?", country="SE",
                                                              llm=answering)]
        return result, answer, pieces

    result, answer, pieces = asyncio.run(use())
    assert result.evidence.doc_ids() == ["pharmacy-se"] and threads[0] is not threading.main_thread()
    assert answer.text == "Apoteket [1]." and answer.citations[0].passage.id == "se"
    assert pieces[0] == "Apoteket [1]." and isinstance(pieces[-1], babelrag.Answer)
