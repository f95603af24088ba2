"""The cross-encoder reranker's loading code, on a tiny BERT the test creates and saves (no download):
transformers weights and the same model exported to ONNX must give the model's own probabilities."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from babelrag.errors import ConfigError
from babelrag.models.rerank import CrossEncoderReranker, build_reranker
from babelrag.types import Hit, Passage

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

WORDS = ["stockholm", "is", "the", "capital", "of", "sweden", "bananas", "are", "yellow", "what", "?"]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object, object]:
    folder = tmp_path_factory.mktemp("tiny-cross-encoder")
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]), encoding="utf-8")
    tokenizer = transformers.BertTokenizerFast(vocab_file=str(vocab))
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=len(WORDS) + 5, hidden_size=16, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=32, num_labels=1)
    model = transformers.BertForSequenceClassification(config).eval()
    model.save_pretrained(folder / "hf")
    tokenizer.save_pretrained(folder / "hf")
    return folder, model, tokenizer


def hits(*texts: str) -> list[Hit]:
    return [Hit(Passage(str(i), t, str(i), "en"), 0.0, "test") for i, t in enumerate(texts)]


def expected(model: object, tokenizer: object, query: str, texts: list[str]) -> np.ndarray:
    batch = tokenizer([query] * len(texts), texts, padding=True, return_tensors="pt")
    with torch.inference_mode():
        logits = model(**batch).logits.reshape(-1).numpy()
    return 1 / (1 + np.exp(-logits))


TEXTS = ["stockholm is the capital of sweden", "bananas are yellow", "the capital ?"]


def test_transformers_weights_from_a_local_path(tiny_model) -> None:
    folder, model, tokenizer = tiny_model
    reranker = build_reranker(f"cross-encoder:{folder / 'hf'}", embedder=None)
    scores = reranker.score("what is the capital of sweden ?", hits(*TEXTS))
    assert np.allclose(scores, expected(model, tokenizer, "what is the capital of sweden ?", TEXTS), atol=1e-5)
    assert all(0.0 <= s <= 1.0 for s in scores) and reranker.name == "cross-encoder:hf"


def test_onnx_export_from_a_local_path(tiny_model) -> None:
    pytest.importorskip("onnxruntime")
    folder, model, tokenizer = tiny_model
    onnx_dir = folder / "onnx-model"
    onnx_dir.mkdir(exist_ok=True)
    sample = tokenizer(["what"], ["stockholm"], return_tensors="pt")
    torch.onnx.export(model, (sample["input_ids"], sample["attention_mask"], sample["token_type_ids"]),
                      str(onnx_dir / "model.onnx"), input_names=["input_ids", "attention_mask", "token_type_ids"],
                      output_names=["logits"], dynamo=False,
                      dynamic_axes={name: {0: "batch", 1: "sequence"}
                                    for name in ("input_ids", "attention_mask", "token_type_ids")})
    tokenizer.backend_tokenizer.save(str(onnx_dir / "tokenizer.json"))
    scores = CrossEncoderReranker(str(onnx_dir)).score("what is the capital of sweden ?", hits(*TEXTS))
    assert np.allclose(scores, expected(model, tokenizer, "what is the capital of sweden ?", TEXTS), atol=1e-4)


def test_a_checkpoint_without_a_trained_head_is_refused(tiny_model, tmp_path: Path) -> None:
    """docs/methods.md#pitfall-random-head: a sentence-embedding checkpoint loaded through a classification class gets a random
    head; its "relevance" would be an arbitrary projection. Refuse it."""
    folder, model, tokenizer = tiny_model
    bare = tmp_path / "bi-encoder"
    model.bert.save_pretrained(bare)  # the encoder only, as a bi-encoder checkpoint ships
    tokenizer.save_pretrained(bare)
    with pytest.raises(ConfigError, match="no trained relevance head"):
        CrossEncoderReranker(str(bare))


def test_bad_paths_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a directory"):
        CrossEncoderReranker(str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="neither an .onnx model nor a config.json"):
        CrossEncoderReranker(str(tmp_path))
