"""DELTA's fused query ([DELTA]; docs/methods.md#delta): one string, the native query beside an English back-off
and cross-lingual anchors, weighted by repetition only. Retriever and corpus stay unchanged.

Steps: English pivot → cultural cue (y, c, L_loc) → anchor bundle (titles, aliases, hint) →
labelled segments → repetition (τ_low 0.6, τ_high 0.85, τ_boost 0.7) → deduplication →
" | "-join and a 900-character cap. Keyword analysis reads each segment in its own language.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, field_validator

from babelrag.lang.languages import language_name
from babelrag.models.bundle import Models
from babelrag.models.llm import LLMError
from babelrag.models.structured import complete_json
from babelrag.models.translate import TranslationFailed, translate
from babelrag.registry import STRATEGIES, Facts
from babelrag.search_config import DeltaConfig, SearchConfig
from babelrag.strategies.locale import CulturalCue, classify_locale
from babelrag.strategies.scope import path_filter
from babelrag.types import Question, SearchRequest, Trace

if TYPE_CHECKING:
    from babelrag.kb import KnowledgeBase


# what the schema's maxima can take in a non-Latin script (two 80-character titles, ten aliases): 150 cut
# 8 of 20 bundles of the 1.5B model mid-string (measured on the quick bench's qa-delta sample)
BUNDLE_TOKENS = 400


class AnchorBundle(BaseModel):
    en_title: str | None = Field(None, max_length=80)
    local_title: str | None = Field(None, max_length=80)
    aliases_en: list[str] = Field(default_factory=list, max_length=5)
    aliases_local: list[str] = Field(default_factory=list, max_length=5)
    extra_disambig: str = Field("", max_length=80)

    @field_validator("extra_disambig")
    @classmethod
    def _eight_words(cls, value: str) -> str:
        return " ".join(value.split()[:8])


def _bundle_prompt(q_en: str, q_orig: str, lang: str, cue: CulturalCue, k: int) -> list[dict[str, str]]:
    facts = {"q_en": q_en, "q_orig": q_orig, "query_lang": lang, "country_or_region": cue.country_or_region,
             "cultural_language": cue.cultural_language, "is_culture_specific": cue.is_culture_specific,
             "confidence": cue.confidence}
    return [{"role": "system", "content":
             "You write retrieval anchors for a question. Reply with one single-line JSON object with exactly "
             "these keys: en_title (a plausible English Wikipedia-style title, or null), local_title (the same in "
             f"{language_name(lang)}, or null), aliases_en (0 to {k} English aliases), aliases_local (0 to {k} "
             f"aliases in {language_name(lang)}), extra_disambig (at most 8 words). English fields in English, "
             f"local fields in {language_name(lang)}; no other keys; null or empty when unsure."},
            {"role": "user", "content": str(facts)}]


@dataclass(frozen=True)
class Fused:
    text: str
    segments: tuple[tuple[str, str], ...]  # (text, lang) per copy, for keyword analysis
    counts: dict[str, Any]


def _norm(text: str | None) -> str:
    return " ".join((text or "").casefold().split())


def fuse_query(q_glob: str, q_local: str, lang: str, cue: CulturalCue | None, bundle: AnchorBundle | None,
               anchor_lang: str, options: DeltaConfig) -> Fused:
    """Eq. 5 repetition, the dedup rules and the cap; pure, so each rule is testable on its own."""
    y, c = (cue.is_culture_specific, cue.confidence) if cue else (False, 0.0)
    if y:
        r_local = 1 + (c >= options.tau_low) + (c >= options.tau_high)
        r_glob = 1 + (c < options.tau_low)
        boost = int(c >= options.tau_boost)
    else:
        r_local, r_glob, boost = 1, 2, 0
    english = lang == "en"
    blocks: list[tuple[str, list[tuple[str, str]], int]] = [("[GLOB]", [(q_glob, "en")], r_glob)]
    if not english or options.english_mode == "paper" or _norm(q_local) != _norm(q_glob):
        blocks.append((f"[LOCAL:{lang}]", [(q_local, lang)], r_local))
    if bundle is not None:
        local_title = bundle.local_title
        if english and options.english_mode == "dedupe" and _norm(local_title) == _norm(bundle.en_title):
            local_title = None
        titles = [(t, tl) for t, tl in ((bundle.en_title, "en"), (local_title, anchor_lang)) if t and t.strip()]
        if len(titles) == 2 and _norm(titles[0][0]) == _norm(titles[1][0]):  # rule (i): one title, once
            titles = titles[:1]
        if titles:
            blocks.append(("[TITLE_BRIDGE]", titles, 1 + boost))
        aliases_en = [a for a in bundle.aliases_en if a.strip()][:options.aliases]
        aliases_local = [a for a in bundle.aliases_local if a.strip()][:options.aliases]
        if aliases_local and {_norm(a) for a in aliases_local} != {_norm(a) for a in aliases_en}:  # rule (ii)
            blocks.append((f"[ALIASES:{anchor_lang}]", [(", ".join(aliases_local), anchor_lang)], 1 + boost))
        if aliases_en:
            blocks.append(("[ALIASES:GLOB]", [(", ".join(aliases_en), "en")], 1))
    hint = " ".join(part for part in ((cue.country_or_region if cue else ""),
                                      (bundle.extra_disambig if bundle else "")) if part.strip())
    if hint and bundle is not None:  # the hint belongs to the anchor bundle: none when it failed
        blocks.append(("[LOCALE_HINT]", [(hint, "en")], 1))
    pieces: list[str] = []
    segments: list[tuple[str, str]] = []
    length = 0
    for label, parts, copies in blocks:
        body = " / ".join(text for text, _ in parts)
        for _ in range(copies):
            piece = f"{label} {body}"
            start = length + (3 if pieces else 0)  # " | " before every piece but the first
            if start >= options.max_chars:
                break
            pieces.append(piece)
            length = start + len(piece)
            room = options.max_chars - start - len(label) - 1
            segments.extend((text[:max(room, 0)], seg_lang) for text, seg_lang in parts if room > 0)
    fused = " | ".join(pieces)[:options.max_chars]
    return Fused(fused, tuple(segments), {"y": y, "c": c, "r_local": r_local, "r_glob": r_glob, "boost": boost,
                                          "blocks": [label for label, _, _ in blocks]})


class DeltaParams(BaseModel):
    """DELTA's repetition thresholds, caps and modes (docs/methods.md#delta)."""

    delta: DeltaConfig = DeltaConfig()


# translation, the cultural cue, the anchor bundle
@STRATEGIES.register("delta", params=DeltaParams,
                     facts=Facts(llm_calls_per_question=3, client_choosable=True, trace_stages=("delta",)),
                     about="DELTA's fused query: the question, an English back-off and anchors")
class Delta:
    name = "delta"

    def __init__(self, models: Models):
        self.models = models

    def plan(self, question: Question, kb: KnowledgeBase, config: SearchConfig, trace: Trace) -> list[SearchRequest]:
        lang = question.lang or "en"
        flt = path_filter(question, config, kb)
        options = config.delta
        if lang == "en" and options.english_mode == "passthrough":
            return [SearchRequest(question.text, kb.name, lang, flt, "delta:passthrough")]
        llm = self.models.llm
        with trace.step("delta", self.name) as step:
            try:
                q_glob = translate(self.models.translator, question.text, lang, "en", trace)
            except TranslationFailed as error:  # no English back-off: the search stage takes the question as written
                trace.fail("translate", str(error), "delta path dropped")
                step["failed"] = str(error)
                return []
            try:
                cue: CulturalCue | None = classify_locale(llm, q_glob, trace)
            except LLMError as error:  # no cue: the generic repetition (r_local 1, r_glob 2), no locale hint
                cue = None
                trace.fail("classifier", str(error), "delta without a cultural cue")
            anchor_lang = lang if options.anchor_language == "query" or cue is None else cue.cultural_language
            bundle = None
            if cue is not None:
                try:
                    bundle = complete_json(llm, _bundle_prompt(q_glob, question.text, anchor_lang, cue, options.aliases),
                                           AnchorBundle, role="anchor generator", trace=trace,
                                           max_tokens=BUNDLE_TOKENS)
                except LLMError as error:  # [DELTA]: invalid twice → GLOB + LOCAL only, logged
                    step["bundle_error"] = str(error)
                    trace.fail("anchors", str(error), "delta with GLOB + LOCAL only")
            fused = fuse_query(q_glob, question.text, lang, cue, bundle, anchor_lang, options)
            step.update(q_glob=q_glob, cue=cue.model_dump() if cue else None,
                        bundle=bundle.model_dump() if bundle else None, fused=fused.text, **fused.counts)
        return [SearchRequest(fused.text, kb.name, lang, flt, self.name, segments=fused.segments, origin="generated")]
