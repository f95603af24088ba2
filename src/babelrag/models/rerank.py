"""Rerankers: re-score one path's candidates against its query text, on one fixed scale.

No cross-encoder ships its weights offline (docs/methods.md#reranker). ``learned`` (relevance/) scores each
candidate as P(relevant) from the signals retrieval already produced, with the KB's tuned model
or the shipped default. ``dense-resort`` re-sorts by the KB embedder's cosine alone (one scale on
every path, but it throws away the keyword arm: hybrid becomes plain dense order); ``dense`` is
its old name. ``cross-encoder:PATH`` loads a sentence-transformers or ONNX cross-encoder from a
local directory; ``none`` skips the stage.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from babelrag.errors import ConfigError
from babelrag.models.embed import Embedder
from babelrag.relevance.learned import LearnedReranker
from babelrag.registry import RERANKERS, Facts
from babelrag.relevance.model import RelevanceModel
from babelrag.types import Hit, SearchRequest

QueryVector = Callable[[str], np.ndarray]


class Reranker(Protocol):
    name: str
    needs_cosines: bool  # candidates must carry their cosine to the re-scoring text (signal ``cosine``) and terms
    # it weighs candidates across languages, so the centred arm's candidates are worth retrieving for it
    # (``retrieve/search.py: centred_limit``)
    wants_centred_candidates: bool

    def score(self, query: str, hits: Sequence[Hit], request: SearchRequest) -> list[float]:
        """One score per hit against ``query`` (the path's text, or what it is re-scored against);
        ``request`` says which path it is (language, origin, segments)."""
        ...


class DenseReranker:
    """Cosine between the query and each candidate: the one retrieval computed (signal ``cosine``), else the
    passage embedded afresh (a text retrieval never saw, as MLRS's translated passages)."""

    name = "dense-resort"
    needs_cosines = True
    wants_centred_candidates = False  # a cosine re-sort keeps the dense arm's order: nothing for them to change

    def __init__(self, embedder: Embedder, query_vector: Callable[[str], np.ndarray] | None = None):
        self.embedder = embedder
        self._query_vector = query_vector or (lambda text: embedder.embed([text], "query")[0])

    def score(self, query: str, hits: Sequence[Hit], request: SearchRequest | None = None) -> list[float]:
        scores: list[float | None] = [h.signals.get("cosine") for h in hits]
        missing = [i for i, score in enumerate(scores) if score is None]
        if missing:
            query_vector = self._query_vector(query)
            fresh = self.embedder.embed([hits[i].passage.text for i in missing], "passage")
            for vector, i in zip(fresh, missing):
                scores[i] = float(vector @ query_vector)
        return [float(score) for score in scores]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


class CrossEncoderReranker:
    """A cross-encoder from a local directory: ONNX (``model.onnx`` + ``tokenizer.json``) or
    sentence-transformers/transformers weights. Scores are probabilities in [0, 1]."""

    needs_cosines = False
    wants_centred_candidates = False

    def __init__(self, path: str, max_length: int = 512, batch_size: int = 16):
        self.path = Path(path).expanduser()
        if not self.path.is_dir():
            raise ConfigError(f"rerank: cross-encoder path {self.path} is not a directory")
        self.name = f"cross-encoder:{self.path.name}"
        self.max_length, self.batch_size = max_length, batch_size
        onnx_files = sorted(self.path.glob("*.onnx")) + sorted(self.path.glob("onnx/*.onnx"))
        self._predict = self._load_onnx(onnx_files[0]) if onnx_files else self._load_transformers()

    def _load_onnx(self, model_file: Path):  # noqa: ANN202 - returns a closure
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as error:
            raise ConfigError("rerank: ONNX cross-encoders need `pip install babelrag[cross-encoder]`") from error
        tokenizer_file = self.path / "tokenizer.json"
        if not tokenizer_file.is_file():
            raise ConfigError(f"rerank: {self.path} has {model_file.name} but no tokenizer.json")
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        tokenizer.enable_truncation(self.max_length)
        tokenizer.enable_padding()
        session = onnxruntime.InferenceSession(str(model_file), providers=["CPUExecutionProvider"])
        wanted = {i.name for i in session.get_inputs()}

        def predict(pairs: list[tuple[str, str]]) -> np.ndarray:
            encodings = tokenizer.encode_batch(pairs)
            feeds = {"input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
                     "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
                     "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64)}
            logits = session.run(None, {k: v for k, v in feeds.items() if k in wanted})[0]
            return self._probabilities(np.asarray(logits, dtype=np.float64))

        return predict

    def _load_transformers(self):  # noqa: ANN202
        if not (self.path / "config.json").is_file():
            raise ConfigError(f"rerank: {self.path} holds neither an .onnx model nor a config.json")
        try:
            import torch
            from transformers import AutoModelForSequenceClassification, AutoTokenizer
        except ImportError as error:
            raise ConfigError("rerank: cross-encoders need `pip install babelrag[cross-encoder]`") from error
        labels = json.loads((self.path / "config.json").read_text()).get("num_labels")
        tokenizer = AutoTokenizer.from_pretrained(self.path, local_files_only=True)
        model, loading = AutoModelForSequenceClassification.from_pretrained(
            self.path, local_files_only=True, output_loading_info=True, **({"num_labels": labels} if labels else {}))
        if loading.get("missing_keys"):  # docs/methods.md#pitfall-random-head: a bi-encoder loaded as a cross-encoder scores at random
            raise ConfigError(f"rerank: {self.path} has no trained relevance head (newly initialised: "
                              f"{', '.join(sorted(loading['missing_keys'])[:4])}); it is not a cross-encoder. "
                              f"Score a bi-encoder by embedding cosine (rerank=dense) instead.")
        model.eval()

        def predict(pairs: list[tuple[str, str]]) -> np.ndarray:
            batch = tokenizer([q for q, _ in pairs], [p for _, p in pairs], padding=True, truncation=True,
                              max_length=self.max_length, return_tensors="pt")
            with torch.inference_mode():
                logits = model(**batch).logits.float().numpy()
            return self._probabilities(logits.astype(np.float64))

        return predict

    @staticmethod
    def _probabilities(logits: np.ndarray) -> np.ndarray:
        if logits.ndim == 1 or logits.shape[1] == 1:
            return _sigmoid(logits.reshape(-1))
        exp = np.exp(logits - logits.max(axis=1, keepdims=True))
        return (exp / exp.sum(axis=1, keepdims=True))[:, -1]

    def score(self, query: str, hits: Sequence[Hit], request: SearchRequest | None = None) -> list[float]:
        pairs = [(query, h.passage.text) for h in hits]
        scores: list[float] = []
        for start in range(0, len(pairs), self.batch_size):
            scores.extend(float(s) for s in self._predict(pairs[start:start + self.batch_size]))
        return scores


_CLIENTS_MAY = Facts(client_choosable=True)


@RERANKERS.register("none", facts=_CLIENTS_MAY, about="no reranking")
def _no_reranker(embedder: Embedder, query_vector: QueryVector | None, relevance: RelevanceModel | None) -> None:
    return None


@RERANKERS.register("dense-resort", aliases=("dense",), facts=_CLIENTS_MAY, about="cosine only")
def _dense(embedder: Embedder, query_vector: QueryVector | None, relevance: RelevanceModel | None) -> Reranker:
    return DenseReranker(embedder, query_vector)


@RERANKERS.register("learned", aliases=("learned:default",), facts=_CLIENTS_MAY,
                    about="P(relevant) from the KB's relevance model (learned:default: the shipped one)")
def _learned(embedder: Embedder, query_vector: QueryVector | None, relevance: RelevanceModel | None) -> Reranker:
    if relevance is None:
        raise ConfigError("rerank: learned needs a relevance model (the KB's, or the shipped default)")
    return LearnedReranker(relevance)


@RERANKERS.register("cross-encoder", argument="PATH", about="cross-encoder:PATH, a local cross-encoder")
def _cross_encoder(path: str, embedder: Embedder, query_vector: QueryVector | None,
                   relevance: RelevanceModel | None) -> Reranker:
    return CrossEncoderReranker(path)


def build_reranker(name: str, embedder: Embedder, query_vector: QueryVector | None = None,
                   relevance: RelevanceModel | None = None) -> Reranker | None:
    """``query_vector`` lets the dense reranker reuse the query vectors retrieval computed;
    ``relevance`` is the KB's model for ``learned``."""
    return RERANKERS.make(name, embedder, query_vector, relevance)
