"""`babelrag analyze preference`: MLRS per (query language, target language), the structural priors,
DeLP, their correlations, a gold-availability sensitivity check, and the language mix of what is retrieved.

The sensitivity check (docs/methods.md#delp-sensitivity) changes gold availability for real: at each ratio, every gold page
of the sample keeps only one of two language versions (the first language for that share of pages,
the second for the rest), the others are taken out of what retrieval returns, and MLRS, the priors
and DeLP are measured again. It costs one full measurement per ratio, so it runs on request.
"""
from __future__ import annotations

import hashlib
import random
import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from babelrag.analysis.delp import FEATURES, Pair, Priors, calibrate, prior_correlations, variability
from babelrag.analysis.mlrs import query_shift, random_reference
from babelrag.concurrency import in_order
from babelrag.config import preset_config
from babelrag.errors import ConfigError
from babelrag.evaluate.golden import GoldenQuestion
from babelrag.kb import KnowledgeBase
from babelrag.models.llm import LLMError, build_llm
from babelrag.models.registry import translator_for
from babelrag.models.rerank import Reranker, build_reranker
from babelrag.models.translate import ParallelTranslator, Translator, translate
from babelrag.progress import progress
from babelrag.retrieve.pipeline import Searcher
from babelrag.strategies.locale import classify_locale
from babelrag.types import Passage, Trace


@dataclass(frozen=True)
class PreferenceOptions:
    n: int = 10  # list size re-scored for MLRS (docs/methods.md#mlrs)
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
    sensitivity_ratios: int = 0  # gold shares measured between the pair's languages (docs/methods.md#delp-sensitivity); 0 = off
    concurrency: int = 1  # questions measured at once (results and trace as sequential)
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


@dataclass
class _Tools:
    """What every measurement of one analysis shares."""

    kb: KnowledgeBase
    options: PreferenceOptions
    golden: Sequence[GoldenQuestion]
    passages: list[Passage]
    kb_langs: list[str]
    rescorer: Reranker
    translator: Translator
    searcher: Searcher
    trace: Trace = field(default_factory=Trace)


@dataclass
class _Measured:
    mlrs: dict[Pair, float]
    n: dict[Pair, int]
    failed: Counter[Pair]
    priors: Priors


def _measure(tools: _Tools, questions: Sequence[GoldenQuestion], p_cult: dict[str, float],
             removed: frozenset[str] = frozenset(), label: str = "preference") -> _Measured:
    """MLRS and the priors over ``questions``, with the ``removed`` passages out of the corpus."""
    options, kb_langs = tools.options, tools.kb_langs
    present = [p for p in tools.passages if p.id not in removed]
    pages: dict[str, set[str]] = defaultdict(set)
    for p in present:
        pages[p.doc_id].add(p.lang)
    exposure: dict[str, Counter[str]] = defaultdict(Counter)
    shifts: dict[Pair, list[float]] = defaultdict(list)
    gold_hits: dict[Pair, list[float]] = defaultdict(list)
    failed: Counter[Pair] = Counter()

    def one(q: GoldenQuestion) -> tuple[GoldenQuestion, list[Passage], dict[str, float | None], Trace]:
        """A question's exposure list and its MLRS per target (None: the translation failed)."""
        trace = Trace()  # merged into the shared trace in question order, so concurrency changes nothing
        hits = tools.searcher.search(q.as_question()).evidence.hits
        ranked = [h.passage for h in hits if h.passage.id not in removed][:options.exposure_k]
        targets = [q.lang] if options.targets == "query" else \
            kb_langs if options.targets == "all" else [t.strip() for t in options.targets.split(",")]
        measured: dict[str, float | None] = {}
        for target in targets:
            try:
                measured[target] = query_shift(q.id, q.question, q.lang, ranked[:options.n], target, tools.rescorer,
                                               tools.translator, trace).mlrs
            except LLMError as error:  # an untranslated list would count as "no rise": leave the query out
                trace.fail("translate", f"{q.id} → {target}: {error}", "query left out of this MLRS cell")
                measured[target] = None
        return q, ranked, measured, trace

    with progress(label, len(questions), "questions") as advance:
        with in_order(one, questions, options.concurrency) as results:
            for q, ranked, measured, trace in results:
                tools.trace.extend(trace)
                exposure[q.lang].update(p.lang for p in ranked)
                for lang in kb_langs:
                    gold_hits[(q.lang, lang)].append(float(any(lang in pages.get(g, set()) for g in q.gold_pages)))
                for target, shift in measured.items():
                    if shift is None:
                        failed[(q.lang, target)] += 1
                    else:
                        shifts[(q.lang, target)].append(shift)
                advance(1)
    query_langs = sorted(exposure)
    priors = Priors(
        p_ret={(lq, ld): exposure[lq][ld] / max(sum(exposure[lq].values()), 1) for lq in query_langs for ld in kb_langs},
        p_db={ld: sum(p.lang == ld for p in present) / max(len(present), 1) for ld in kb_langs},
        length={ld: float(statistics.median([len(p.text) for p in present if p.lang == ld] or [0])) for ld in kb_langs},
        p_gold={pair: sum(v) / len(v) for pair, v in gold_hits.items()}, p_cult=p_cult)
    return _Measured({pair: statistics.fmean(v) for pair, v in shifts.items()},
                     {pair: len(v) for pair, v in shifts.items()}, failed, priors)


def _cultural(tools: _Tools, questions: Sequence[GoldenQuestion], llm_translator: Translator) -> dict[str, float]:
    """p_cult: the share of questions the locale classifier ties to each language (one LLM call each)."""
    counts: Counter[str] = Counter()
    for q in questions:
        try:
            cue = classify_locale(build_llm(tools.options.llm), _english(q, tools.golden, llm_translator, tools.trace),
                                  tools.trace)
            counts[cue.cultural_language] += 1
        except LLMError as error:
            tools.trace.fail("classifier", f"{q.id}: {error}", "question left out of the cultural prior")
    return {ld: counts[ld] / max(sum(counts.values()), 1) for ld in tools.kb_langs}


def _kept_version(doc_id: str, ratio: float) -> int:
    """0 (the first language) for a ``ratio`` share of pages, 1 otherwise; the same page keeps the same
    side as the ratio grows, so the series moves gold one page at a time."""
    return 0 if int(hashlib.sha256(doc_id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF < ratio else 1


def gold_sensitivity(tools: _Tools, questions: Sequence[GoldenQuestion], p_cult: dict[str, float],
                     pair: tuple[str, str], ratios: int) -> dict[str, Any]:
    """docs/methods.md#delp-sensitivity measured: per ratio, each gold page present in both languages keeps one version, MLRS
    and DeLP are measured again; the range and std of each over the ratios (averaged over query
    languages) and a paired permutation test of MLRS against DeLP variability."""
    versions = {(p.doc_id, p.lang): p.id for p in tools.passages}
    gold = sorted({g for q in questions for g in q.gold_pages if all((g, lang) in versions for lang in pair)})
    if not gold:
        return {"languages": list(pair), "ratios": 0,
                "note": f"no gold page of the sample exists in both {pair[0]} and {pair[1]}: nothing to vary"}
    raw: dict[Pair, list[float]] = defaultdict(list)
    debiased: dict[Pair, list[float]] = defaultdict(list)
    shares: list[float] = []
    p_gold: dict[str, list[float]] = {lang: [] for lang in pair}
    for ratio in [i / (ratios - 1) for i in range(ratios)]:
        removed = frozenset(versions[(g, pair[1 - _kept_version(g, ratio)])] for g in gold)
        measured = _measure(tools, questions, p_cult, removed, label=f"gold ratio {ratio:.1f}")
        calibration = calibrate(measured.mlrs, measured.priors, tools.options.lam, tools.options.eps)
        shares.append(sum(_kept_version(g, ratio) == 0 for g in gold) / len(gold))
        for lang in pair:  # the availability the regression saw: it must move with the ratio
            p_gold[lang].append(statistics.fmean(v for (_, ld), v in measured.priors.p_gold.items() if ld == lang))
        for key in calibration.raw:
            if key[1] in pair:
                raw[key].append(calibration.raw[key])
                debiased[key].append(calibration.debiased[key])
    return {"languages": list(pair), "ratios": ratios, "gold_pages": len(gold), "first_language_share": shares,
            "p_gold": p_gold, **variability(raw, debiased)}


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
    extra = 50 if options.sensitivity_ratios else 0  # room for the versions a sensitivity ratio takes out
    searcher = Searcher(kb, preset_config("vector", {"k": options.exposure_k + extra,
                                                     "candidates": max(options.exposure_k + extra, 50),
                                                     "country_filter": False}))
    tools = _Tools(kb, options, golden, passages, kb_langs, rescorer, translator, searcher)
    p_cult = _cultural(tools, questions, llm_translator) if options.cultural else {ld: 0.0 for ld in kb_langs}
    measured = _measure(tools, questions, p_cult)
    mlrs, priors = measured.mlrs, measured.priors
    result: dict[str, Any] = {
        "kb": kb.name, "questions": len(questions), "query_languages": sorted({q for q, _ in priors.p_ret}),
        "document_languages": kb_langs, "options": {k: v for k, v in options.__dict__.items() if k != "notes"},
        "random_reference": random_reference(options.n),
        "mlrs": {f"{q}|{t}": v for (q, t), v in mlrs.items()},
        "mlrs_n": {f"{q}|{t}": n for (q, t), n in measured.n.items()},
        "mlrs_failed": {f"{q}|{t}": n for (q, t), n in measured.failed.items()},
        "priors": {"p_ret": {f"{q}|{d}": v for (q, d), v in priors.p_ret.items()}, "p_db": priors.p_db,
                   "length": priors.length, "p_gold": {f"{q}|{d}": v for (q, d), v in priors.p_gold.items()},
                   "p_cult": priors.p_cult},
        "notes": list(options.notes)}
    if any(q != t for q, t in mlrs):  # DeLP calibrates a matrix: it needs more than the diagonal
        calibration = calibrate(mlrs, priors, options.lam, options.eps)
        result["delp"] = calibration.to_dict()
        result["correlations"] = prior_correlations(calibration, priors, options.eps)
        if len(mlrs) < 3 * len(FEATURES):
            result["notes"].append(f"DeLP fits {len(FEATURES)} weights to {len(mlrs)} (query, document language) "
                                   f"pairs: too few for a stable regression (want ≥ {3 * len(FEATURES)}); read β "
                                   f"and DeLP as indicative")
        if options.sensitivity_ratios:
            pair = options.sensitivity_pair or ("en", next((d for d in kb_langs if d != "en"), kb_langs[0]))
            result["sensitivity"] = gold_sensitivity(tools, questions, p_cult, pair, options.sensitivity_ratios)
    else:
        result["notes"].append("DeLP needs the MLRS matrix (several target languages): run with --targets all")
    result["failures"] = [f"{f.stage}: {f.reason}" for f in tools.trace.failures]
    result["llm"] = tools.trace.llm_totals()
    return result
