"""The MT-model-from-path translator, on a tiny seq2seq model the test creates and saves (no download)."""
from __future__ import annotations

from pathlib import Path

import pytest

from babelrag.errors import ConfigError
from babelrag.models.translate import CachedTranslator, MTTranslator, translate_many
from babelrag.types import Trace

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
VOCAB = ["<pad>", "</s>", "<unk>", "__en__", "__sv__", "hej", "världen", "hello", "world", "good", "morning"]


@pytest.fixture(scope="module")
def tiny_mt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers

    folder = tmp_path_factory.mktemp("tiny-mt")
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(VOCAB)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="</s>",
                                                     unk_token="<unk>")
    torch.manual_seed(0)
    config = transformers.T5Config(vocab_size=len(VOCAB), d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2,
                                   decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    transformers.T5ForConditionalGeneration(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_mt_model_from_a_local_path_finds_its_language_tokens(tiny_mt: Path, tmp_path: Path) -> None:
    mt = MTTranslator(str(tiny_mt), max_length=8)
    assert mt.lang_codes == {"en": "__en__", "sv": "__sv__"}  # M2M-style tokens found in the vocabulary
    first = mt.translate_targets("hej världen", "sv", ["en"])["en"]
    assert first.calls[0].role == "translator" and first.calls[0].completion_tokens > 0
    assert mt.translate_targets("hej världen", "sv", ["en"])["en"].text == first.text  # greedy: deterministic
    with pytest.raises(ConfigError, match="no language token for de"):
        mt.translate_targets("hej världen", "sv", ["de"])
    (tiny_mt / "babelrag.json").write_text('{"lang_codes": {"en": "__sv__", "sv": "__en__"}}')
    try:
        assert MTTranslator(str(tiny_mt)).lang_codes == {"en": "__sv__", "sv": "__en__"}  # declared wins
    finally:
        (tiny_mt / "babelrag.json").unlink()


def test_a_looping_mt_output_is_a_failure_and_never_cached(tiny_mt: Path, tmp_path: Path) -> None:
    """The untrained model loops ("hej hej hej …"), as real small models do on some inputs."""
    cached = CachedTranslator(MTTranslator(str(tiny_mt), max_length=8), tmp_path / "cache.sqlite")
    trace, again = Trace(), Trace()
    first = translate_many(cached, "hej världen", "sv", ["en"], trace)
    assert first.texts == {} and "loop" in first.failed["en"]
    translate_many(cached, "hej världen", "sv", ["en"], again)
    assert [c.cached for c in trace.llm_calls + again.llm_calls] == [False, False]  # asked again, paid again
    assert trace.llm_calls[0].finish == "length"  # it looped to its budget: the call says so


def test_a_source_longer_than_the_mt_model_reads_is_a_failure(tiny_mt: Path) -> None:
    long = " ".join(["hej världen good morning"] * 3)  # 12 tokens for a model reading 8: the rest unread
    done = translate_many(MTTranslator(str(tiny_mt), max_length=8), long, "sv", ["en"], Trace())
    assert done.texts == {} and "longer than the model's 8 tokens" in done.failed["en"]


def test_mt_path_without_a_model_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no transformers model"):
        MTTranslator(str(tmp_path))
