"""Per-language analysis: unit checks on the terms, and BM25 alone through the real engine per script."""
from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest

from babelrag.config import preset_config
from babelrag.ingest.pipeline import index_sources
from babelrag.kb import KnowledgeBase
from babelrag.lang import analyzers
from babelrag.lang.analyzers import normalize, query_terms, tokens
from babelrag.retrieve.pipeline import Searcher
from babelrag.types import Question

DOCS = [
    # (id, lang, text): words inside unsegmented text, inflected forms, combining marks
    ("zh1", "zh", "我们在北京大学学习中文和历史"),
    ("zh2", "zh", "上海是一个国际化的城市"),
    ("ja1", "ja", "東京の大学で経済学を勉強していました"),
    ("ja2", "ja", "京都には古いお寺がたくさんあります"),
    ("ko1", "ko", "형태소분석기를사용해서문장을나눕니다"),
    ("ko2", "ko", "서울은 대한민국의 수도입니다"),
    ("th1", "th", "ข้าวผัดอร่อยมากที่กรุงเทพ"),
    ("th2", "th", "น้ำแข็งละลายเร็วในฤดูร้อน"),
    ("de1", "de", "Die alten Häuser der Normannen stehen noch heute"),
    ("ru1", "ru", "Студенты читали книги в библиотеке"),
    ("ar1", "ar", "ذهب الطلاب إلى المكتبات الكبيرة"),
    ("vi1", "vi", "Tôi là sinh viên đại học ở Hà Nội"),
    ("hi1", "hi", "भारत की राजधानी नई दिल्ली है"),
    ("de2", "de", "Die Hauptstraße ist lang"),
    ("xx1", "ka", "ＴＯＫＹＯ და 東京タワー"),
]


@pytest.fixture(scope="module")
def keyword_kb(tmp_path_factory: pytest.TempPathFactory) -> KnowledgeBase:
    folder = tmp_path_factory.mktemp("scripts")
    source = folder / "docs.jsonl"
    source.write_text("\n".join(json.dumps({"id": i, "lang": lang, "text": text}, ensure_ascii=False)
                                for i, lang, text in DOCS), encoding="utf-8")
    store = str(folder / "store")
    index_sources("scripts", [str(source)], store)
    kb = KnowledgeBase.open("scripts", store)
    yield kb
    kb.close()


def keyword_ids(kb: KnowledgeBase, query: str, lang: str | None) -> list[str]:
    searcher = Searcher(kb, preset_config("keyword"))
    return [h.passage.id for h in searcher.search(Question(query, lang=lang)).evidence.hits]


@pytest.mark.parametrize("query, lang, expected", [
    ("大学", "zh", "zh1"),            # a word inside unsegmented Chinese
    ("北京", "zh", "zh1"),
    ("東京", "ja", "ja1"),            # the engine's own tokenizer misses 東京
    ("勉強する", "ja", "ja1"),        # dictionary form matches the inflected 勉強して
    ("분석기", "ko", "ko1"),          # a noun inside run-together Korean
    ("กรุงเทพ", "th", "th1"),        # a word inside unsegmented Thai
    ("น้ำแข็ง", "th", "th2"),
    ("Haus", "de", "de1"),           # Snowball: Häuser → haus
    ("библиотека", "ru", "ru1"),
    ("المكتبة", "ar", "ar1"),
    ("sinh viên", "vi", "vi1"),      # Vietnamese syllables
    ("राजधानी", "hi", "hi1"),        # Devanagari vowel signs stay inside the word
    ("tokyo", "en", "xx1"),          # NFKC folds full-width Latin
    ("HAUPTSTRASSE", "de", "de2"),   # casefold: ß → ss
    ("東京タワー", "ka", "xx1"),      # fallback bigrams for Han/Kana outside zh/ja
])
def test_keyword_search_finds_words_in_every_script(keyword_kb: KnowledgeBase, query: str, lang: str | None,
                                                    expected: str) -> None:
    assert expected in keyword_ids(keyword_kb, query, lang)


@pytest.mark.parametrize("query", ["นำ", "ข้", "้"])
def test_thai_combining_mark_substrings_are_not_found(keyword_kb: KnowledgeBase, query: str) -> None:
    # "นำ" is น้ำ with its tone mark removed; "ข้" cuts ข้าว inside its cluster; "้" is a bare mark
    assert keyword_ids(keyword_kb, query, "th") == []


def test_cjk_text_is_not_one_token() -> None:
    assert len(tokens("我们在北京大学学习中文和历史", "zh")) > 3
    assert len(tokens("東京の大学で経済学を勉強していました", "ja")) > 3
    assert "大学" in tokens("我们在北京大学学习中文和历史", "zh")


def test_thai_terms_never_start_with_a_combining_mark() -> None:
    text = "น้ำแข็งละลายเร็วในฤดูร้อน ข้าวผัดอร่อยมากที่กรุงเทพ"
    terms = tokens(text, "th")
    assert terms and all(not unicodedata.category(t[0]).startswith("M") for t in terms)
    assert "".join(terms) == text.replace(" ", "")


def test_normalize_folds_width_and_case_but_keeps_thai_sara_am() -> None:
    assert normalize("ＴＯＫＹＯ Straße") == "tokyo strasse"
    assert normalize("น้ำ") == "น้ำ"  # NFKC alone would give น้ํา (NIKHAHIT + AA)


def test_stemming_and_function_words() -> None:
    assert tokens("Häuser", "de") == tokens("Haus", "de")
    assert "를" not in tokens("분석기를 사용합니다", "ko")
    assert "の" not in tokens("東京の大学", "ja")


def test_a_query_is_analyzed_once_and_only_short_ones_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """The keyword arm and the re-scorer read one analysis of a query (each piece in its own language, however the
    pieces are shaped); only a query of at most QUERY_CHARS_KEPT characters (its pieces together) whose analysis has
    at most TERMS_KEPT terms is kept, the last QUERIES_KEPT of them; forgetting drops every one."""
    analyzers.forget_queries()
    real, calls = analyzers.tokens, []
    monkeypatch.setattr(analyzers, "tokens", lambda text, lang: calls.append(text) or real(text, lang))
    pieces = (("Die alten Häuser", "de"), ("ข้าวผัดอร่อย", "th"))
    assert query_terms(pieces) == tuple(real("Die alten Häuser", "de") + real("ข้าวผัดอร่อย", "th"))
    assert query_terms([list(piece) for piece in pieces]) is query_terms(pieces) and len(calls) == 2

    def kept(*texts: str) -> bool:
        query = tuple((text, None) for text in texts)
        query_terms(query)
        return query in analyzers._kept

    word = "abcdefghijklmnopqrs "  # 20 characters, one term
    assert kept(word * 100) and not kept(word * 100 + "x")  # 2,000 characters, then 2,001
    assert not kept(word * 50, word * 50 + "x")  # pieces count together
    assert kept("ab " * analyzers.TERMS_KEPT) and not kept("ab " * (analyzers.TERMS_KEPT + 1))
    assert kept("\ufb03" * 600) and not kept("\ufb03" * 700)  # ﬃ: NFKC makes one word of 1,800 letters, then 2,100
    for n in range(analyzers.QUERIES_KEPT + 1):
        query_terms(((f"query {n}", "en"),))
    assert len(analyzers._kept) == analyzers.QUERIES_KEPT and (("query 0", "en"),) not in analyzers._kept
    analyzers.forget_queries()
    assert not analyzers._kept


def test_unknown_language_falls_back_to_words(tmp_path: Path) -> None:
    assert tokens("Გამარჯობა მსოფლიო", "ka") == ["გამარჯობა", "მსოფლიო"]
    assert tokens("ສະບາຍດີ", "lo")  # Lao: grapheme bigrams, never empty
