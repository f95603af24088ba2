"""A LlamaIndex retriever: babelrag's multilingual retrieval under any query engine or chat engine.

    from llama_index.core.query_engine import RetrieverQueryEngine
    from babelrag.integrations.llama_index import BabelragRetriever

    retriever = BabelragRetriever(kb="faq", preset="learned", top_k=5, country="SE")
    engine = RetrieverQueryEngine.from_args(retriever, llm=my_llm)
    engine.query("Var köper jag receptfria läkemedel?")

Nodes are ``TextNode``s (id = passage id, ``metadata`` with lang, country, doc_id…) with babelrag's
score. LlamaIndex's query carries no country, so the retriever's ``country`` applies to every query;
make one retriever per country (they can share a ``babelrag.KB``).
"""
from __future__ import annotations

from typing import Any

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from babelrag.api import KB, open_kb
from babelrag.integrations import hit_metadata


class BabelragRetriever(BaseRetriever):
    """``kb``: a name (opened from ``store``) or an open ``babelrag.KB``; ``preset``/``settings`` as in
    ``babelrag.KB.search``."""

    def __init__(self, kb: str | KB, store: str | None = None, preset: str = "default", top_k: int = 10,
                 country: str | None = None, lang: str | None = None, settings: dict[str, Any] | None = None,
                 **kwargs: Any):
        super().__init__(**kwargs)
        self._owns_kb = not isinstance(kb, KB)
        self.kb = kb if isinstance(kb, KB) else open_kb(kb, store)
        self.preset, self.top_k, self.country, self.lang = preset, top_k, country, lang
        self.settings = dict(settings or {})

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        result = self.kb.search(query_bundle.query_str, preset=self.preset, country=self.country, lang=self.lang,
                                k=self.top_k, settings=self.settings)
        return [NodeWithScore(node=TextNode(id_=h.passage.id, text=h.passage.text, metadata=hit_metadata(h)),
                              score=float(h.score)) for h in result.evidence.hits]

    def close(self) -> None:
        """Release the KB if this retriever opened it (its shard closes with the process's last handle)."""
        if self._owns_kb:
            self.kb.close()
