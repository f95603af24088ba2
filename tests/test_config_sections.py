"""A configuration in sections maps onto the flat fields, and a method's parameters are accepted only
beside that method; unknown names fail at parse time naming the field and the known names."""
from __future__ import annotations

import pytest

from babelrag.config import make_config, parse_overrides, preset_config
from babelrag.errors import ConfigError

SECTIONED = {
    "query": {"strategy": "hyde", "hyde_lang": "pivot",
              "extra_paths": ["pivot", {"strategy": "delta", "delta": {"aliases": 2}}]},
    "retrieval": {"mode": "hybrid", "rerank": "learned", "candidates": 40},
    "selection": {"merge": "max", "threshold": "auto", "collapse": "page", "k": 7},
    "answer": {"context": "dkm", "dkm_parts": "translated", "generate_k": 3},
}


def test_sections_map_onto_the_flat_fields() -> None:
    flat = make_config({"strategy": "hyde", "hyde_lang": "pivot", "extra_paths": ["pivot", "delta"],
                        "delta": {"aliases": 2}, "mode": "hybrid", "rerank": "learned", "candidates": 40,
                        "merge": "max", "threshold": "auto", "collapse": "page", "k": 7, "context": "dkm",
                        "dkm_parts": "translated", "generate_k": 3})
    assert make_config(SECTIONED) == flat


def test_a_section_sits_on_a_preset_and_on_set_keys() -> None:
    config = preset_config("delta", parse_overrides(["query.delta.tau_low=0.5", "selection.k=4", "mode=vector"]))
    assert (config.strategy, config.delta.tau_low, config.k, config.mode) == ("delta", 0.5, 4, "vector")
    assert preset_config("hyde", {"query": {"hyde_lang": "pivot"}}).hyde_lang == "pivot"  # the preset's strategy


@pytest.mark.parametrize("values, message", [
    ({"query": {"strategy": "nope"}}, "query.strategy: unknown query strategy 'nope' (known: as_written"),
    ({"query": {"strategy": "kb_languages", "hyde_lang": "pivot"}}, "query.kb_languages.hyde_lang: Extra inputs"),
    ({"query": {"extra_paths": [{"strategy": "pivot", "dkm_parts": "both"}]}}, "query.extra_paths.0.pivot.dkm_parts"),
    ({"answer": {"context": "qtt", "dkm_parts": "refined"}}, "answer.qtt.dkm_parts: Extra inputs"),
    ({"answer": {"context": "nope"}}, "answer.context: unknown context strategy 'nope' (known: none, "),
    ({"selection": {"k": 0}}, "selection.k: Input should be greater than or equal to 1"),
    ({"retrieval": {"rerank": "nope"}}, "rerank: unknown reranker 'nope' (known: auto, none"),
    ({"query": "hyde"}, "query: a mapping of settings"),
])
def test_a_wrong_section_fails_naming_the_field(values: dict, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        make_config(values)
    assert str(error.value).startswith(message)


def test_a_long_name_is_cut_in_the_error() -> None:
    with pytest.raises(ConfigError) as error:
        make_config({"query": {"strategy": "x" * 5000}})
    assert "x" * 41 not in str(error.value) and len(str(error.value)) < 300


@pytest.mark.parametrize("name", ["coral", "tuned"])
def test_a_strategy_that_plans_no_paths_is_refused_as_an_extra_path(name: str) -> None:
    with pytest.raises(ConfigError, match=f"extra_paths: {name}"):
        make_config({"extra_paths": [name]})


def test_a_long_key_a_user_wrote_is_cut_in_the_error() -> None:
    with pytest.raises(ConfigError) as caught:
        make_config({"retrieval": {"x" * 300: 1}})
    assert "retrieval." in str(caught.value) and "x" * 41 not in str(caught.value)
