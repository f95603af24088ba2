"""Codes checked at the door: ISO 639 languages and ISO 3166 countries, any case, the same wherever a
question comes in; what the KB does not hold is a warning on the result, or an error when nothing could
be found."""
from __future__ import annotations

import pytest

import babelrag
from babelrag.codes import iso_country, iso_language
from babelrag.errors import ConfigError, InputError

LOCAL = [{"id": "se", "text": "Apoteket säljer receptfria läkemedel i hela Sverige.", "lang": "sv", "country": "SE"},
         {"id": "pl", "text": "Apteka sprzedaje leki bez recepty w całej Polsce.", "lang": "pl", "country": "pl"}]
GLOBAL = {"id": "eu", "text": "Medicines bought in one EU country may be used in another.", "lang": "en",
          "scope": "global"}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("door")
    babelrag.index("local", LOCAL, store=str(folder / "store"))
    babelrag.index("mixed", [*LOCAL, GLOBAL, {"id": "nordic", "text": "Nordic pharmacies cooperate on rare medicines.",
                                              "lang": "en", "country": "Nordics"}], store=str(folder / "store"))
    return str(folder / "store")


def test_codes_are_iso_in_any_case() -> None:
    assert [iso_language(c) for c in ("sv", "SV", "sv-SE", "swe", "zh_Hant", "fil")] == ["sv", "sv", "sv", "sv", "zh",
                                                                                           "fil"]
    assert [iso_language(c) for c in ("xx", "english", "s1", "")] == [None] * 4
    assert (iso_country("se"), iso_country("sweden"), iso_country("EN")) == ("SE", None, None)


def test_the_api_checks_codes_and_warns_about_what_the_kb_lacks(store: str) -> None:
    with babelrag.open_kb("local", store) as kb:
        assert kb.countries == ["PL", "SE"]  # indexed "pl" is "PL"
        lower = kb.search("receptfria läkemedel", country="se")
        assert {h.passage.country for h in lower.evidence.hits} == {"SE"} and not lower.trace.warnings()
        assert kb.search("receptfria läkemedel", lang="SV").question.lang == "sv"
        for bad, field in [({"country": "sweden"}, "country"), ({"lang": "english"}, "question language"),
                           ({"settings": {"langs": ["xx"]}}, "langs")]:
            with pytest.raises(ConfigError, match=f"^{field}: not an ISO") as refused:
                kb.search("receptfria läkemedel", **bad)
            assert "sweden" not in str(refused.value) and "english" not in str(refused.value)
        with pytest.raises(ConfigError, match="^country: this knowledge base has no passages for that country"):
            kb.search("receptfria läkemedel", country="FI")  # no FI and no global passage: nothing to find
        with pytest.raises(ConfigError, match=r"^langs: this knowledge base holds none of these languages \(it holds"):
            kb.search("receptfria läkemedel", settings={"langs": ["de"]})
        partly = kb.search("receptfria läkemedel", settings={"langs": ["de", "sv"]})
        assert partly.evidence.doc_ids() == ["se"]
        assert partly.trace.warnings() == ["scope failed (1 of the langs not in this knowledge base (it holds pl, sv)); "
                                           "searched the others"]
    with babelrag.open_kb("mixed", store) as kb:
        assert "NORDICS" in kb.countries  # a label of the KB's own, not ISO: any case of it is that label
        assert kb.search("rare medicines", country="nordics", k=1).evidence.doc_ids() == ["nordic"]
        finnish = kb.search("medicines", country="FI")
        assert finnish.evidence.doc_ids() == ["eu"]
        assert "country not in this knowledge base" in finnish.trace.warnings()[0]
        assert "country not in this knowledge base" in finnish.to_dict()["warnings"][0]


def test_index_refuses_what_search_refuses(tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(InputError, match="'xx' is not an ISO 639 language code"):
        babelrag.index("bad", [{"id": "a", "text": "x", "lang": "xx"}], store=str(tmp_path / "store"))
