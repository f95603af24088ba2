"""LlamaIndex: babelrag's multilingual retrieval under any query engine or chat engine, and a vector
store that indexes LlamaIndex nodes into a KB without converting them by hand.

    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.vector_stores import MetadataFilter, MetadataFilters
    from babelrag.integrations.llama_index import BabelragRetriever, BabelragVectorStore

    BabelragVectorStore(kb="faq").add(SentenceSplitter().get_nodes_from_documents(documents))
    retriever = BabelragRetriever(kb="faq", preset="learned", top_k=5, country="SE",
                                  filters=MetadataFilters(filters=[MetadataFilter(key="lang", value="sv")]))
    engine = RetrieverQueryEngine.from_args(retriever, llm=my_llm)
    engine.query("Var köper jag receptfria läkemedel?")

Nodes are ``TextNode``s (id = passage id, ``ref_doc_id`` = its page, ``metadata`` with lang, country,
doc_id…) with babelrag's score; the retrieval bookkeeping (path, record_id, chunk, source, doc_id, scope)
stays in the metadata for code and out of the text the LLM and any embedder read. ``aretrieve`` searches
on a worker thread, off the event loop. ``filters`` (``MetadataFilters``) follow babelrag's policy
(``babelrag.integrations.selection``). LlamaIndex's query carries no country, so the retriever's
``country`` applies to every query; make one retriever per country (they can share a ``babelrag.KB``).
The vector store embeds with the KB's own embedder (it ignores LlamaIndex embeddings: ``is_embedding_query``
is False, so queries need no embedding model either).
"""
from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import BaseNode, MetadataMode, NodeRelationship, NodeWithScore, QueryBundle, \
    RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import BasePydanticVectorStore, MetadataFilters, VectorStoreQuery, \
    VectorStoreQueryResult

import babelrag
from babelrag.api import KB, open_kb
from babelrag.errors import ConfigError
from babelrag.integrations import BOOKKEEPING, hit_metadata, record_of
from babelrag.integrations.selection import search_selected, selection_of
from babelrag.types import Hit


def node_of(hit: Hit) -> TextNode:
    """A passage as a node: its page as the source document; bookkeeping kept out of model text."""
    return TextNode(id_=hit.passage.id, text=hit.passage.text, metadata=hit_metadata(hit),
                    excluded_llm_metadata_keys=list(BOOKKEEPING), excluded_embed_metadata_keys=list(BOOKKEEPING),
                    relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=hit.passage.doc_id)})


def conditions_of(filters: MetadataFilters | None) -> list[tuple[str, str, Any]]:
    """``MetadataFilters`` as ``(key, operator, value)`` conditions (nested AND groups flattened)."""
    if filters is None:
        return []
    if str(getattr(filters.condition, "value", filters.condition)).lower() != "and":
        raise ConfigError("filters: only AND joins conditions (babelrag has no OR or NOT filter)")
    out: list[tuple[str, str, Any]] = []
    for item in filters.filters:
        if isinstance(item, MetadataFilters):
            out += conditions_of(item)
        else:
            out.append((item.key, str(getattr(item.operator, "value", item.operator)), item.value))
    return out


class BabelragRetriever(BaseRetriever):
    """``kb``: a name (opened from ``store``) or an open ``babelrag.KB``; ``preset``/``settings`` as in
    ``babelrag.KB.search``; ``filters``: LlamaIndex ``MetadataFilters`` applied to every query."""

    def __init__(self, kb: str | KB, store: str | None = None, preset: str = "default", top_k: int = 10,
                 country: str | None = None, lang: str | None = None, settings: dict[str, Any] | None = None,
                 filters: MetadataFilters | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self._owns_kb = not isinstance(kb, KB)
        self.kb = kb if isinstance(kb, KB) else open_kb(kb, store)
        self.preset, self.top_k, self.country, self.lang = preset, top_k, country, lang
        self.settings = dict(settings or {})
        self.selection = selection_of(conditions_of(filters))  # a bad filter fails here, not at the first query

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = search_selected(self.kb, query_bundle.query_str, self.selection, k=self.top_k, settings=self.settings,
                               preset=self.preset, country=self.country, lang=self.lang)
        return [NodeWithScore(node=node_of(h), score=float(h.score)) for h in hits]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        """The search on a worker thread: an async engine's event loop never waits on it."""
        return await asyncio.to_thread(self._retrieve, query_bundle)

    def close(self) -> None:
        """Release the KB if this retriever opened it (its shard closes with the process's last handle)."""
        if self._owns_kb:
            self.kb.close()


class BabelragVectorStore(BasePydanticVectorStore):
    """A KB as a LlamaIndex vector store: ``add`` indexes nodes (text, metadata, ``ref_doc_id`` as the page;
    created on the first add), ``delete`` removes a source document's nodes, ``query`` searches with
    babelrag's pipeline (``preset``), honouring ``filters`` and ``doc_ids``."""

    stores_text: bool = True
    is_embedding_query: bool = False  # babelrag embeds the query itself
    kb: str
    store: str | None = None
    preset: str = "default"
    country: str | None = None
    _handle: KB | None = PrivateAttr(default=None)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)

    @property
    def client(self) -> KB:
        """The open KB (``babelrag.KB``)."""
        with self._lock:
            if self._handle is None:
                self._handle = open_kb(self.kb, self.store)
            return self._handle

    def add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        records = [record_of(n.node_id, n.get_content(metadata_mode=MetadataMode.NONE),
                             {**n.metadata, "doc_id": n.metadata.get("doc_id") or n.ref_doc_id or n.node_id})
                   for n in nodes]
        if records:
            babelrag.index(self.kb, records, self.store)
        return [record["id"] for record in records]

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        self.client.delete(doc_ids=[ref_doc_id])

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        if not query.query_str:
            raise ConfigError("query: babelrag searches text (query_str); it computes its own embeddings")
        selection = selection_of(conditions_of(query.filters))
        if query.doc_ids:
            selection = replace(selection, doc_ids=tuple(query.doc_ids))
        hits = search_selected(self.client, query.query_str, selection, k=query.similarity_top_k, settings={},
                               preset=self.preset, country=self.country)
        return VectorStoreQueryResult(nodes=[node_of(h) for h in hits], similarities=[float(h.score) for h in hits],
                                      ids=[h.passage.id for h in hits])

    def close(self) -> None:
        with self._lock:
            if self._handle is not None:
                self._handle.close()
                self._handle = None
