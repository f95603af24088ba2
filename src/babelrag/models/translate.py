"""Translators behind one protocol, and a persistent cache in front of any of them.

No MT weights for our languages ship offline (docs/methods.md#translation), so the default translator is the
LLM ([DELTA] prompt D: fluent, meaning-preserving, usual forms of names, nothing added, strict
JSON). ``mt:PATH`` loads a seq2seq model (Marian, NLLB, M2M, T5…) from a local directory.
Translation is the one LLM call in the chat retrieval path, so every result is cached by
(backend, model, source, target, text) and every call is counted, cached or not.
"""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import regex
from pydantic import BaseModel, Field, create_model

from babelrag import deadline
from babelrag.errors import ConfigError
from babelrag.json_store import JsonStore, digest
from babelrag.lang.detect import detector
from babelrag.lang.languages import FLORES, language_name
from babelrag.models.llm import LLM, LLMError
from babelrag.models.llm_types import KeyedLocks
from babelrag.models.loops import LoopGuard, loops
from babelrag.models.structured import complete_json, record
from babelrag.types import LLMCall, Trace


@dataclass(frozen=True, slots=True)
class Translation:
    """A translation with the model calls that produced it (≤ 1 target carries them). ``problem`` says
    why the text cannot be used (never cached, never searched, never shown as translated)."""

    text: str
    calls: tuple[LLMCall, ...] = field(default=())
    problem: str | None = None


class TranslationFailed(LLMError):
    """The translator gave no usable translation; callers take their method's fallback."""


class Translator(Protocol):
    name: str

    def translate_targets(self, text: str, src: str, targets: Sequence[str]) -> dict[str, Translation]: ...


@dataclass(frozen=True, slots=True)
class Translated:
    texts: dict[str, str]  # usable translations (and pass-throughs), by target
    failed: dict[str, str]  # target → why its translation can't be used


def translate_many(translator: Translator, text: str, src: str, targets: Sequence[str],
                   trace: Trace | None = None) -> Translated:
    """One text into several languages with one call (the KB-language path's single LLM call). Every
    call is charged to ``trace``, failed ones too; the source language passes through."""
    wanted = [t for t in dict.fromkeys(targets) if t != src]
    done = translator.translate_targets(text, src, wanted) if wanted else {}
    if trace is not None:
        trace.llm_calls.extend(call for t in wanted for call in done[t].calls)
    texts = {t: text for t in targets if t == src}
    texts.update({t: done[t].text for t in wanted if done[t].problem is None})
    return Translated(texts, {t: str(done[t].problem) for t in wanted if done[t].problem is not None})


def translate(translator: Translator, text: str, src: str, tgt: str, trace: Trace | None = None) -> str:
    """One text into one language; raises ``TranslationFailed`` when the result can't be used."""
    result = translate_many(translator, text, src, [tgt], trace)
    if tgt in result.failed:
        raise TranslationFailed(f"{translator.name} {src}→{tgt}: {result.failed[tgt]}")
    return result.texts[tgt]


class _Single(BaseModel):
    translation: str = Field(min_length=1)


# One worked example (the same question in every language we can vouch for): small models
# otherwise answer the question instead of translating it, or copy English into every key.
EXAMPLE = {
    "en": "How many people live in Oslo?", "de": "Wie viele Menschen leben in Oslo?",
    "fr": "Combien de personnes vivent à Oslo ?", "es": "¿Cuántas personas viven en Oslo?",
    "it": "Quante persone vivono a Oslo?", "pt": "Quantas pessoas vivem em Oslo?",
    "nl": "Hoeveel mensen wonen er in Oslo?", "sv": "Hur många människor bor i Oslo?",
    "da": "Hvor mange mennesker bor der i Oslo?", "no": "Hvor mange mennesker bor i Oslo?",
    "fi": "Kuinka monta ihmistä asuu Oslossa?", "pl": "Ile osób mieszka w Oslo?", "cs": "Kolik lidí žije v Oslu?",
    "ro": "Câți oameni locuiesc în Oslo?", "hu": "Hányan élnek Oslóban?", "ru": "Сколько людей живёт в Осло?",
    "uk": "Скільки людей живе в Осло?", "el": "Πόσοι άνθρωποι ζουν στο Όσλο;", "tr": "Oslo'da kaç kişi yaşıyor?",
    "ar": "كم عدد الأشخاص الذين يعيشون في أوسلو؟", "he": "כמה אנשים גרים באוסלו?",
    "fa": "چند نفر در اسلو زندگی می‌کنند؟", "hi": "ओस्लो में कितने लोग रहते हैं?", "th": "มีคนอาศัยอยู่ในออสโลกี่คน",
    "vi": "Có bao nhiêu người sống ở Oslo?", "id": "Berapa banyak orang yang tinggal di Oslo?",
    "ms": "Berapa ramai orang tinggal di Oslo?", "zh": "有多少人住在奥斯陆？", "ja": "オスロには何人が住んでいますか？",
    "ko": "오슬로에는 몇 명이 살고 있나요?",
}


# The example's city in every script it appears in: a translation naming it when the source does not
# copied the example (measured: the 0.5B model turned a Greek question into "Wie viele Panthers sind in Oslo?").
_EXAMPLE_CITY = regex.compile(r"\b(?:oslo|осло|όσλο|أوسلو|אוסלו|اسلو|ओस्लो|oslu|oslób\w*|oslossa)\b"
                              r"|ออสโล|奥斯陆|オスロ|오슬로", regex.IGNORECASE)  # unspaced scripts: no word boundaries
_UNSPACED = regex.compile(r"[\u0E00-\u0E7F\u3040-\u30FF\u3400-\u9FFF\uAC00-\uD7AF]")


def translation_problem(source: str, translation: str, src: str, target: str) -> str | None:
    """Why a translation can't be used, or None. Small models loop to the token limit, copy the
    prompt's example, return the source, or answer in another language (docs/methods.md#translation)."""
    text = translation.strip()
    if not text:
        return "empty translation"
    size, source_size = len(text.encode("utf-8")), len(source.encode("utf-8"))  # bytes: fair across scripts
    if size > 4 * source_size + 60:
        return f"runaway output ({size} bytes for {source_size})"
    if loops(text, source):
        return "repeats itself (a decoding loop)"
    if _EXAMPLE_CITY.search(text) and not _EXAMPLE_CITY.search(source):
        return "copied the prompt's example (Oslo)"
    long_enough = len(source.split()) >= 5 or len(_UNSPACED.findall(source)) >= 6  # names stay as they are
    if src != target and text == source.strip() and long_enough:
        return "returned the source unchanged"
    return None


def _prompt(text: str, src: str, targets: Sequence[str]) -> list[dict[str, str]]:
    names = ", ".join(f"{language_name(t)} ({t})" for t in targets)
    single = len(targets) == 1
    example_src = next(lang for lang in ("fr", "es", "de", *EXAMPLE) if lang != src and lang not in targets)
    shown = {("translation" if single else t): EXAMPLE.get(t, "") for t in targets}
    messages = [{"role": "system", "content":
                 f"You are a translation engine. You translate the user's text into {names}. The text is never "
                 f"addressed to you: translate it, never answer it. Keep the exact meaning and form (a question "
                 f"stays a question); write names in their usual form in each language; add nothing. Reply with "
                 f"JSON only, one key per language."}]
    if all(shown.values()):
        messages += [{"role": "user", "content": f"Translate from {language_name(example_src)}: "
                                                 f"{EXAMPLE[example_src]}"},
                     {"role": "assistant", "content": json.dumps(shown, ensure_ascii=False)}]
    return [*messages, {"role": "user", "content": f"Translate from {language_name(src)}: {text}"}]


PASSAGE_CHARS = 300  # longer texts are passages: translated as plain text, not JSON


def translation_budget(text: str) -> int:
    """Tokens a translation of ``text`` may take: about as many as its source (bytes: fair across scripts)."""
    return 2 * len(text.encode("utf-8")) // 3 + 32


class LLMTranslator:
    def __init__(self, llm: LLM, max_tokens: int = 256):
        self.llm, self.max_tokens = llm, max_tokens
        self.name = f"llm:{llm.name}"

    def _plain(self, text: str, src: str, target: str, trace: Trace) -> str:
        """Passages: plain text out, a budget tied to the source length (no JSON to escape, no repair
        round when a small model rambles to the limit)."""
        messages = [{"role": "system", "content":
                     f"You are a translation engine. Translate the user's text from {language_name(src)} into "
                     f"{language_name(target)}. Keep the exact meaning; write names in their usual form; add "
                     f"nothing. Reply with the translation only."},
                    {"role": "user", "content": text}]
        guard, budget = LoopGuard(text), translation_budget(text)
        completion = self.llm.stream(messages, guard, max_tokens=budget)
        record(trace, "translator", completion)
        if completion.stopped and not guard.fired:  # cut by the deadline or the client, not finished
            deadline.check("the rest of a translation")
            raise LLMError(f"{self.llm.name}: translation cut off before its end")
        if not guard.fired and completion.cut(budget):  # half a passage is not its translation
            raise LLMError(f"{self.llm.name}: translation cut at its budget of {budget} tokens")
        return completion.text.strip()

    def _call(self, text: str, src: str, targets: Sequence[str], trace: Trace) -> dict[str, str]:
        if len(targets) == 1 and len(text) > PASSAGE_CHARS:
            return {targets[0]: self._plain(text, src, targets[0], trace)}
        budget = max(self.max_tokens, translation_budget(text)) * len(targets)
        if len(targets) == 1:
            result = complete_json(self.llm, _prompt(text, src, targets), _Single, role="translator", trace=trace,
                                   max_tokens=budget)
            return {targets[0]: result.translation.strip()}
        schema = create_model("Translations", **{t: (str, Field(min_length=1)) for t in targets})
        result = complete_json(self.llm, _prompt(text, src, targets), schema, role="translator", trace=trace,
                               max_tokens=budget)
        return {t: getattr(result, t).strip() for t in targets}

    @staticmethod
    def _confidently_other(text: str, target: str, candidates: Sequence[str]) -> bool:
        """Too short a text (a name, a number) says nothing about its language."""
        if len(text) < 20:
            return False
        lang, confidence = detector(tuple(sorted({target, *candidates}))).detect(text)
        return lang != target and confidence > 0.8

    def _attempt(self, text: str, src: str, targets: Sequence[str], scratch: Trace) -> tuple[dict[str, str], str | None]:
        """The texts the model gave, or none and why (invalid JSON twice, an unreachable endpoint)."""
        try:
            return self._call(text, src, targets, scratch), None
        except LLMError as error:
            return {}, str(error)

    def translate_targets(self, text: str, src: str, targets: Sequence[str]) -> dict[str, Translation]:
        """One call for all targets; a target that came back confidently in another language (small
        models copy English into every key) is asked for again on its own, once. Every result is checked
        (``translation_problem``); a failed one carries its problem instead of a usable text."""
        scratch = Trace()
        texts, error = self._attempt(text, src, targets, scratch)
        if len(targets) > 1:
            for target in targets:
                if target in texts and self._confidently_other(texts[target], target, [src, *targets]):
                    retry, retry_error = self._attempt(text, src, [target], scratch)
                    texts[target] = retry.get(target, texts[target])
                    error = error or retry_error
        problems = {}
        for target in targets:
            if target not in texts:
                problems[target] = error or "no translation"
            elif problem := translation_problem(text, texts[target], src, target):
                problems[target] = problem
            elif self._confidently_other(texts[target], target, [src, *targets]):
                problems[target] = "came back in another language"
        calls = tuple(scratch.llm_calls)  # every call (retries too) is charged to one target: the first usable
        payer = next((t for t in targets if t not in problems), targets[0])  # one (it is the one cached)
        return {t: Translation(texts.get(t, ""), calls if t == payer else (), problems.get(t)) for t in targets}


def model_lang_codes(vocab: Mapping[str, int], declared: Mapping[str, str] | None = None) -> dict[str, str]:
    """ISO code → the model's own language token. ``declared`` (a model folder's ``babelrag.json``)
    wins; else FLORES-200 tokens (NLLB: ``eng_Latn``) or M2M-100 tokens (``__en__``) found in the vocabulary."""
    if declared:
        return dict(declared)
    flores = {iso: code for iso, code in FLORES.items() if code in vocab}
    if flores:
        return flores
    return {iso: f"__{iso}__" for iso in {*FLORES, "en"} if f"__{iso}__" in vocab}


class MTTranslator:
    """A seq2seq translation model from a local directory (transformers). Many-to-many models need the
    target named by a language token: ``lang_codes`` maps ISO codes to them, read from the folder's
    ``babelrag.json`` ({"lang_codes": {"sv": "swe_Latn", ...}}) or found in the vocabulary (NLLB's
    FLORES-200 codes, M2M-100's ``__sv__``). Pair models (Marian) need none."""

    def __init__(self, path: str, lang_codes: dict[str, str] | None = None, max_length: int = 256):
        self.path = Path(path).expanduser()
        if not (self.path / "config.json").is_file():
            raise ConfigError(f"translator: {self.path} holds no transformers model (config.json)")
        try:
            from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
        except ImportError as error:
            raise ConfigError("translator: mt:PATH needs `pip install babelrag[cross-encoder]` (transformers)") from error
        self._tokenizer = AutoTokenizer.from_pretrained(self.path, local_files_only=True)
        self._model = AutoModelForSeq2SeqLM.from_pretrained(self.path, local_files_only=True).eval()
        declared = lang_codes
        settings = self.path / "babelrag.json"
        if declared is None and settings.is_file():
            try:
                declared = json.loads(settings.read_text(encoding="utf-8"))["lang_codes"]
            except (json.JSONDecodeError, KeyError, TypeError) as error:
                raise ConfigError(f"translator: {settings}: expected {{\"lang_codes\": {{\"en\": \"...\"}}}}") from error
        self.lang_codes = model_lang_codes(self._tokenizer.get_vocab(), declared)
        self.max_length = max_length
        self.name = f"mt:{self.path.name}"
        self._lock = threading.Lock()

    def translate_targets(self, text: str, src: str, targets: Sequence[str]) -> dict[str, Translation]:
        import torch

        if self.lang_codes and (unknown := [t for t in targets if t not in self.lang_codes]):
            raise ConfigError(f"translator {self.name}: no language token for {', '.join(unknown)} "
                              f"(known: {', '.join(sorted(self.lang_codes))}); declare it in {self.path}/babelrag.json")
        out = {}
        for target in targets:
            with self._lock:
                start = time.perf_counter()
                tokenizer = self._tokenizer
                if hasattr(tokenizer, "src_lang") and src in self.lang_codes:
                    tokenizer.src_lang = self.lang_codes[src]
                batch = tokenizer([text], return_tensors="pt", truncation=True, max_length=self.max_length)
                options: dict[str, Any] = {"max_new_tokens": self.max_length, "num_beams": 1, "do_sample": False}
                if target in self.lang_codes:
                    options["forced_bos_token_id"] = tokenizer.convert_tokens_to_ids(self.lang_codes[target])
                with torch.inference_mode():
                    generated = self._model.generate(**batch, **options)
                translated = tokenizer.batch_decode(generated, skip_special_tokens=True)[0].strip()
                finished = int(generated[0, -1]) in (tokenizer.eos_token_id, tokenizer.pad_token_id)
                read = int(batch["input_ids"].shape[1])
                call = LLMCall("translator", self.name, read, int(generated.shape[1]), time.perf_counter() - start,
                               finish="stop" if finished else "length")
            # half a passage in, or half a translation out, is not the passage's translation
            problem = f"source longer than the model's {self.max_length} tokens" if read >= self.max_length else \
                translation_problem(text, translated, src, target) or \
                (None if finished else f"translation cut at its budget of {self.max_length} tokens")
            out[target] = Translation(translated, (call,), problem)
        return out


def _cut_when_stored(text: str, calls: Sequence[dict[str, Any]]) -> bool:
    """A cached one-call translation that ended at its budget (stored before that was refused): the
    backend said so, or said nothing while a passage's plain translation used its whole budget. Worst
    case a miss: the translation is asked for again, never served cut."""
    if len(calls) != 1:  # a retried structured answer: the last call decided, and it validated
        return False
    finish, tokens = calls[0].get("finish", ""), calls[0]["completion_tokens"]
    return finish == "length" or (not finish and len(text) > PASSAGE_CHARS
                                  and tokens >= translation_budget(text))


class ParallelTranslator:
    """A parallel corpus's own translations: the version of the same page in the target language
    (XQuAD is professionally translated). Texts it does not know go to ``fallback``, if any."""

    name = "parallel"

    def __init__(self, page_of: dict[str, str], versions: dict[tuple[str, str], str],
                 fallback: Translator | None = None):
        self.page_of, self.versions, self.fallback = page_of, versions, fallback

    def translate_targets(self, text: str, src: str, targets: Sequence[str]) -> dict[str, Translation]:
        page = self.page_of.get(text)
        found = {t: Translation(self.versions[(page, t)]) for t in targets if (page, t) in self.versions}
        missing = [t for t in targets if t not in found]
        if missing and self.fallback is None:
            raise ConfigError(f"translator parallel: no {', '.join(missing)} version of this text and no fallback")
        if missing:
            found.update(self.fallback.translate_targets(text, src, missing))
        return found


class CachedTranslator:
    """Results stored by (translator, source, target, text), with the cost of the call that made them."""

    def __init__(self, inner: Translator, path: Path):
        self.inner, self.name = inner, inner.name
        self._store = JsonStore(path, "translations")
        self._asking = KeyedLocks()  # one text (all its targets) asked once at a time

    def _key(self, src: str, tgt: str, text: str) -> str:
        return digest([self.name, src, tgt, text])

    def translate_targets(self, text: str, src: str, targets: Sequence[str]) -> dict[str, Translation]:
        with self._asking(digest([src, text])):
            return self._translate_targets(text, src, targets)

    def _translate_targets(self, text: str, src: str, targets: Sequence[str]) -> dict[str, Translation]:
        found: dict[str, Translation] = {}
        for target in targets:
            stored = self._store.get(self._key(src, target, text))
            if stored is not None and translation_problem(text, stored["text"], src, target) is None \
                    and not _cut_when_stored(text, stored["calls"]):
                # (checked again: entries from before a check existed would otherwise bypass it)
                found[target] = Translation(stored["text"], tuple(LLMCall(**c, cached=True) for c in stored["calls"]))
        missing = [t for t in targets if t not in found]
        if missing:
            fresh = self.inner.translate_targets(text, src, missing)
            for target, translation in fresh.items():
                if translation.problem is not None:  # a failure is never cached: the next run asks again
                    continue
                self._store.put(self._key(src, target, text), {
                    "text": translation.text,
                    "calls": [{k: getattr(c, k) for k in ("role", "model", "prompt_tokens", "completion_tokens",
                                                          "seconds", "finish")} for c in translation.calls]})
            found.update(fresh)
        return {t: found[t] for t in targets}
