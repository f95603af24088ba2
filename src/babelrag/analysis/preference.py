"""`babelrag analyze preference`: MLRS per (query language, target language), the structural priors,
DeLP, their correlations, a gold-ratio sensitivity check, and the language mix of what is retrieved."""
from __future__ import annotations

import random
import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from babelrag.analysis.delp import Priors, calibrate, gold_sensitivity, prior_correlations
from babelrag.analysis.mlrs import query_shift, random_reference
from babelrag.config import preset_config
from babelrag.errors import ConfigError
from babelrag.evaluate.golden import GoldenQuestion
from babelrag.kb import KnowledgeBase
from babelrag.models.llm import LLMError, build_llm
from babelrag.models.registry import translator_for
from babelrag.models.rerank import build_reranker
from babelrag.models.translate import ParallelTranslator, Translator, translate
from babelrag.progress import progress
from babelrag.retrieve.pipeline import Searcher
from babelrag.strategies.locale import classify_locale
from babelrag.types import Passage, Trace


@dataclass(frozen=True)
class PreferenceOptions:
    n: int = 10  # list size re-scored for MLRS (SPEC default)
    exposure_k: int = 50  # list size for the exposure prior
    targets: str = "query"  # query (T = Lq) | all (the matrix: every KB language) | a comma-separated list
    per_lang: int | None = 20  # questions sampled per query language (None: all)
    rescorer: str = "dense"
    translator: str = "llm"  # llm | parallel (the KB's own language versions) | mt:PATH
    llm: str = "qwen2.5-coder-0.5b"
    lam: float = 1.0
    eps: float = 1e-6
    cultural: bool = True  # run the locale classifier for p_cult (one LLM call per question)
    seed: int = 0
    sensitivity_pair: tuple[str, str] | None = None
    notes: list[str] = field(default_factory=list)


def sample(golden: Sequence[GoldenQuestion], per_lang: int | None, seed: int) -> list[GoldenQuestion]:
    by_lang: dict[str, list[GoldenQuestion]] = defaultdict(list)
    for q in golden:
        by_lang[q.lang].append(q)
    rng = random.Random(seed)
    chosen = {q.id for qs in by_lang.values() for q in (rng.sample(qs, per_lang) if per_lang and len(qs) > per_lang
                                                            else qs)}
    return [q for q in golden if q.id in chosen]


def parallel_translator(passages: Sequence[Passage], fallback: Translator) -> ParallelTranslator:
    return ParallelTranslator({p.text: p.doc_id for p in passages}, {(p.doc_id, p.lang): p.text for p in passages},
                              fallback)


def _english(q: GoldenQuestion, golden: Sequence[GoldenQuestion], translator: Translator, trace: Trace) -> str:
    """The question in English: its parallel version in the golden set (same ``qid`` tag) if there is one."""
    if q.lang == "en":
        return q.question
    qid = q.tags.get("qid")
    twin = next((g for g in golden if g.lang == "en" and qid and g.tags.get("qid") == qid), None)
    return twin.question if twin else translate(translator, q.question, q.lang, "en", trace)


def analyze_preference(kb: KnowledgeBase, golden: Sequence[GoldenQuestion],
                       options: PreferenceOptions = PreferenceOptions()) -> dict[str, Any]:
    questions = sample(golden, options.per_lang, options.seed)
    passages = kb.collection.scroll()
    kb_langs = sorted({p.lang for p in passages})
    llm_translator = translator_for("llm" if options.translator == "parallel" else options.translator, options.llm)
    translator = parallel_translator(passages, llm_translator) if options.translator == "parallel" else llm_translator
    if options.rescorer in ("learned", "none"):
        raise ConfigError(f"rescorer: '{options.rescorer}' re-scores retrieval's own signals, not a translated "
                          f"text; MLRS needs a relevance model of the text (dense, cross-encoder:PATH)")
    rescorer = build_reranker(options.rescorer, kb.embedder, kb.query_vector)
    if rescorer is None:
        raise ValueError("analyze: MLRS needs a re-scorer (dense or cross-encoder:PATH)")
    searcher = Searcher(kb, preset_config("vector", {"k": options.exposure_k, "candidates": max(options.exposure_k, 50),
                                                     "country_filter": False}))
    pages: dict[str, set[str]] = defaultdict(set)
    for p in passages:
        pages[p.doc_id].add(p.lang)
    exposure: dict[str, Counter[str]] = defaultdict(Counter)
    shifts: dict[tuple[str, str], list[float]] = defaultdict(list)
    gold_hits: dict[tuple[str, str], list[float]] = defaultdict(list)
    cultural: Counter[str] = Counter()
    failed: Counter[tuple[str, str]] = Counter()
    trace = Trace()
    with progress("preference", len(questions)) as advance:
        for q in questions:
            ranked = [h.passage for h in searcher.search(q.as_question()).evidence.hits]
            exposure[q.lang].update(p.lang for p in ranked)
            for lang in kb_langs:
                gold_hits[(q.lang, lang)].append(float(any(lang in pages.get(g, set()) for g in q.gold_pages)))
            targets = [q.lang] if options.targets == "query" else \
                kb_langs if options.targets == "all" else [t.strip() for t in options.targets.split(",")]
            for target in targets:
                try:
                    shift = query_shift(q.id, q.question, q.lang, ranked[:options.n], target, rescorer, translator,
                                        trace)
                except LLMError as error:  # an untranslated list would count as "no rise": leave the query out
                    trace.fail("translate", f"{q.id} → {target}: {error}", "query left out of this MLRS cell")
                    failed[(q.lang, target)] += 1
                    continue
                shifts[(q.lang, target)].append(shift.mlrs)
            if options.cultural:
                try:
                    cue = classify_locale(build_llm(options.llm), _english(q, golden, llm_translator, trace), trace)
                    cultural[cue.cultural_language] += 1
                except LLMError as error:
                    trace.fail("classifier", f"{q.id}: {error}", "question left out of the cultural prior")
            advance(1)
    query_langs = sorted(exposure)
    total_passages = len(passages)
    priors = Priors(
        p_ret={(lq, ld): exposure[lq][ld] / max(sum(exposure[lq].values()), 1) for lq in query_langs for ld in kb_langs},
        p_db={ld: sum(p.lang == ld for p in passages) / total_passages for ld in kb_langs},
        length={ld: float(statistics.median(len(p.text) for p in passages if p.lang == ld)) for ld in kb_langs},
        p_gold={pair: sum(v) / len(v) for pair, v in gold_hits.items()},
        p_cult={ld: cultural[ld] / max(sum(cultural.values()), 1) for ld in kb_langs})
    mlrs = {pair: statistics.fmean(values) for pair, values in shifts.items()}
    result: dict[str, Any] = {
        "kb": kb.name, "questions": len(questions), "query_languages": query_langs, "document_languages": kb_langs,
        "options": {k: v for k, v in options.__dict__.items() if k != "notes"},
        "random_reference": random_reference(options.n),
        "mlrs": {f"{q}|{t}": v for (q, t), v in mlrs.items()},
        "mlrs_n": {f"{q}|{t}": len(v) for (q, t), v in shifts.items()},
        "mlrs_failed": {f"{q}|{t}": n for (q, t), n in failed.items()},
        "failures": [f"{f.stage}: {f.reason}" for f in trace.failures],
        "priors": {"p_ret": {f"{q}|{d}": v for (q, d), v in priors.p_ret.items()}, "p_db": priors.p_db,
                   "length": priors.length, "p_gold": {f"{q}|{d}": v for (q, d), v in priors.p_gold.items()},
                   "p_cult": priors.p_cult},
        "llm": trace.llm_totals(), "notes": list(options.notes)}
    if any(q != t for q, t in mlrs):  # DeLP calibrates a matrix: it needs more than the diagonal
        calibration = calibrate(mlrs, priors, options.lam, options.eps)
        result["delp"] = calibration.to_dict()
        result["correlations"] = prior_correlations(calibration, priors, options.eps)
        pair = options.sensitivity_pair or ("en", next((d for d in kb_langs if d != "en"), kb_langs[0]))
        result["sensitivity"] = gold_sensitivity(mlrs, priors, pair, options.lam, options.eps)
    else:
        result["notes"].append("DeLP needs the MLRS matrix (several target languages): run with --targets all")
    return result
