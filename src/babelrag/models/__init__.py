"""Pluggable models behind small protocols: embedders and rerankers (LLMs and translators later)."""
