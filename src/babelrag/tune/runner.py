"""``babelrag tune``: fit a KB's relevance model and per-cell profile on its golden dev questions.

1. The KB's questions (by ``index``/``kb``), checked: known languages, countries the KB holds, enough
   dev questions to fit (``min_dev``).
2. The relevance model: dev candidates (``training.py``), feature set chosen by grouped CV (``fitting.py``).
3. Each option (``strategies/tuned.py``) searched on every dev question exactly as a tuned search
   serves it, within the LLM-call budget, each question scored by the fold model that never saw it or
   its translations (cross-fitting, ``crossfit``); per cell the option and τ chosen with shrinkage
   (``choose.py``).
4. Model and profile stored with the KB (its manifest) — written only at the end, so a failure
   changes nothing — and, if asked, to a profile file. The profile keeps a hash of every question it
   was tuned on: ``eval`` and the bench keep those out of their headline figures.
The test split is never read here: score it with ``eval --preset tuned`` or the bench.
"""
from __future__ import annotations

import hashlib
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import yaml

from babelrag.config import preset_config
from babelrag.errors import ConfigError, InputError, shown
from babelrag.evaluate.clusters import cluster_keys
from babelrag.evaluate.golden import GoldenQuestion, sample_per_cell
from babelrag.evaluate.runs import question_row
from babelrag.kb import KnowledgeBase
from babelrag.lang.languages import NAMES
from babelrag.progress import progress
from babelrag.relevance.model import RelevanceModel, default_model, describe, model_for, question_hash
from babelrag.retrieve.pipeline import Searcher
from babelrag.strategies.tuned import ANY, OPTIONS, CellRule, Profile, needs_copies
from babelrag.tune.choose import DevRow, choose
from babelrag.tune.fitting import MIN_REFIT_ARTICLES, VARIANTS, fit_selected
from babelrag.tune.training import collect

Objective = Literal["mrr", "recall@10"]
# dev rows (question versions: each language's features are its own training rows) the every-feature relevance
# model needs to be a candidate
FULL_MODEL_QUESTIONS = 30


@dataclass(frozen=True)
class TuneOptions:
    objective: Objective = "mrr"
    max_llm_calls: float = 0.0  # per question; 0: only options that call no model
    max_docs: int | None = None  # cap on passages passed (k)
    recall_loss: float = 0.005  # τ may cost at most this much Recall@k on new questions (bounded from dev)
    min_dev: int = 10  # dev questions needed to tune at all, translations once (the full model needs 30 versions)
    cell_min: int = 10  # dev questions a cell needs for a rule of its own
    prior: float = 10.0  # shrinkage weight, in questions
    llm: str | None = None
    fit_model: bool = True  # False: keep the KB's current model (or the shipped default)
    dev_share: float | None = None  # no split in the golden set: hash this share of questions into dev
    store_with_kb: bool = True  # False: leave the KB as it was (the bench keeps profiles in files)
    llm_per_cell: int | None = None  # options that call a model: measured on this many dev questions per cell
    selection_check: bool = True  # False: the one-standard-error rule alone (what the check changes is measured so)
    min_refit_articles: int = MIN_REFIT_ARTICLES  # fewer dev articles: no full refit (the hybrid one still competes)


@dataclass(frozen=True)
class TuneResult:
    profile: Profile
    model: RelevanceModel
    fit: dict[str, Any]
    dev: int  # rows: each language version of a question
    questions: int  # the questions behind them (a question and its translations once)
    options: dict[str, dict[str, float]] = field(default_factory=dict)  # option → dev objective, LLM calls


def questions_for(kb: KnowledgeBase, golden: Sequence[GoldenQuestion]) -> list[GoldenQuestion]:
    """The questions naming this KB, checked against what it holds."""
    mine = [q for q in golden if (q.index or q.kb) == kb.name]
    if not mine:
        named = sorted({q.index or q.kb for q in golden})
        raise ConfigError(f"tune: the golden set names no question for knowledge base '{kb.name}' (it names "
                          f"{', '.join(shown(name) for name in named[:8])}{' …' if len(named) > 8 else ''}); "
                          f"set each question's kb or index")
    countries = set(kb.manifest.languages.countries)
    for q in mine:
        if q.lang not in NAMES:
            raise InputError("golden set", None, f"question '{shown(q.id)}': unknown language '{shown(q.lang)}'",
                             field="lang")
        if q.country and q.country not in countries:
            raise InputError("golden set", None, f"question '{shown(q.id)}': country '{shown(q.country)}' is not in "
                                                 f"knowledge base '{kb.name}' "
                                                 f"(it has {', '.join(sorted(countries)) or 'none'})",
                             field="country")
    return mine


def shipped_for(kb: KnowledgeBase) -> RelevanceModel | None:
    """The shipped relevance model, where it was fitted on this KB's embedder (on another's cosines its weights
    mean nothing)."""
    shipped = default_model()
    return shipped if shipped.fits(kb.embedder.fingerprint()) else None


class NoDevQuestions(ConfigError):
    """The golden set holds no dev question for the KB (and no share to hash one was given)."""


def dev_split(questions: Sequence[GoldenQuestion], dev_share: float | None) -> list[GoldenQuestion]:
    dev = [q for q in questions if q.tags.get("split") == "dev"]
    if dev or dev_share is None:
        if not dev:
            raise NoDevQuestions("tune: no question is tagged split=dev; tuning on the questions it is scored on "
                                 "would be leakage. Tag a dev split in the golden set, or pass --dev-share 0.3 to hash "
                                 "one")
        return dev
    by_hash = [q for q in questions
               if int(hashlib.sha256(q.tags.get("qid", q.id).encode()).hexdigest()[:8], 16) / 0xFFFFFFFF < dev_share]
    return by_hash


class TooFewQuestions(ConfigError):
    """Not enough dev questions to tune (the bench then keeps the shipped model)."""


def _profile(kb: KnowledgeBase, model: RelevanceModel, option: str, targets: dict[str, list[str]],
             **rules: Any) -> Profile:
    return Profile(kb=kb.name, kb_created_at=kb.manifest.created_at, embedder=kb.embedder.fingerprint(),
                   relevance=describe(model, ("variant",)), model=model.to_dict(),
                   options=dict(OPTIONS), targets=targets, global_rule=rules.pop("global_rule", CellRule(option=option)),
                   **rules)


def _measure(kb: KnowledgeBase, option: str, questions: Sequence[GoldenQuestion], model: RelevanceModel,
             targets: dict[str, list[str]], options: TuneOptions, scratch: Path) -> list[DevRow]:
    """Each dev question searched with ``option`` exactly as a tuned search would serve it (a profile
    whose every cell says ``option``); the model scores each question with the fold model that was not
    fitted on it."""
    rows = []
    folder = scratch / option
    folder.mkdir()
    write_profile(_profile(kb, model, option, targets), folder / f"{kb.name}.yaml")
    config = preset_config("tuned", {"profile": str(folder), **({"k": options.max_docs} if options.max_docs else {}),
                                     **({"llm": options.llm} if options.llm else {})})
    searcher = Searcher(kb, config)
    with progress(f"tune: {option}", len(questions)) as advance:
        for q in questions:
            result = searcher.search(q.as_question())
            row = question_row(q, result, result.trace, 0.0)
            rows.append(DevRow(q.id, q.country, q.lang, row[options.objective], row["llm_calls"], row))
            advance(1)
    return rows


def _budget(options: TuneOptions, dev_questions: int) -> dict[str, Any]:
    """What the profile was tuned within and on how many dev questions (a question and its translations once), kept
    with it — also by a profile tuned on nothing (0), which the bench still runs beside the tuned ones."""
    return {"max_llm_calls": options.max_llm_calls, "max_docs": options.max_docs, "recall_loss": options.recall_loss,
            "cell_min": options.cell_min, "prior": options.prior, "selection_check": options.selection_check,
            "min_refit_articles": options.min_refit_articles,
            "dev_questions": dev_questions, "tuned_at": time.strftime("%Y-%m-%dT%H:%M:%S")}


def tune(kb: KnowledgeBase, golden: Sequence[GoldenQuestion], options: TuneOptions = TuneOptions()) -> TuneResult:
    """Fits, measures and chooses; stores the model and profile with the KB at the very end (the KB is
    not touched before: measuring reads profiles from a scratch folder)."""
    dev = dev_split(questions_for(kb, golden), options.dev_share)
    asked = len(set(cluster_keys([q.model_dump() for q in dev])))  # a question and its translations once
    if asked < options.min_dev:
        raise TooFewQuestions(f"tune: {asked} dev questions for '{kb.name}'; tuning needs at least "
                              f"{options.min_dev} (a question and its translations count once; and "
                              f"{FULL_MODEL_QUESTIONS} question versions to fit every feature of the relevance "
                              f"model): tag more questions split=dev")
    candidates = collect(kb, dev, preset_config("+country"), golden=dev)
    shares = kb.manifest.languages.all
    targets = {f"{country}|{lang}": langs for (country, lang), langs in candidates.best_paths(3, shares).items()
               if len(langs) > 1}  # one path measured says nothing about which translations to add
    if options.fit_model:
        model, fitted = fit_selected(candidates, {"name": f"{kb.name}-tuned", "embedder": kb.embedder.fingerprint(),
                                                  "trained_on": f"{len(dev)} dev rows ({asked} questions) of {kb.name}",
                                                  "questions": asked}, shipped_for(kb), FULL_MODEL_QUESTIONS,
                                     texts=[q.question for q in dev], min_articles=options.min_refit_articles)
    else:
        model, fitted = model_for(kb.manifest.profile), {"variant": "kept"}
        model.check(kb.embedder.fingerprint(), kb.name)
    with tempfile.TemporaryDirectory() as scratch:
        results = {"as_written": _measure(kb, "as_written", dev, model, targets, options, Path(scratch))}
        if kb.pivot_copies() is not None:  # no model call at query time: measured on every dev question
            for option in filter(needs_copies, OPTIONS):
                results[option] = _measure(kb, option, dev, model, targets, options, Path(scratch))
        if options.max_llm_calls > 0 and options.llm_per_cell != 0:
            sampled = sample_per_cell(dev, options.llm_per_cell)
            for option in OPTIONS:
                if option not in results and not needs_copies(option):
                    results[option] = _measure(kb, option, sampled, model, targets, options, Path(scratch))
    costs = {o: sum(r.llm_calls for r in rows) / len(rows) for o, rows in results.items() if rows}
    results = {o: rows for o, rows in results.items() if rows}
    global_rule, kbs, cells = choose(results, costs, options.max_llm_calls, options.cell_min, options.prior,
                                     options.recall_loss, options.max_docs or 10,
                                     selection_check=options.selection_check)
    if options.max_docs:
        for rule in (global_rule, *kbs.values(), *cells.values()):
            rule.k = options.max_docs
    if fitted["variant"] in VARIANTS:  # the threshold `threshold: auto` uses with this model
        model = replace(model, meta={**model.meta, "threshold": global_rule.threshold})
    profile = _profile(kb, model, global_rule.option, targets, global_rule=global_rule, kbs=kbs, cells=cells)
    profile = profile.model_copy(update={
        "relevance": {**describe(model, ("variant",)), "selection": fitted}, "objective": options.objective,
        "options": {o: OPTIONS[o] for o in results},
        "budget": _budget(options, asked),
        "tuned_on": sorted({question_hash(q.question) for q in dev})})
    if options.store_with_kb:
        kb.update_manifest(profile=profile.model_dump(mode="json"), relevance=describe(model, ("variant",)))
    measured = {o: {options.objective: sum(r.objective for r in rows) / len(rows), "llm_calls": costs[o]}
                for o, rows in results.items()}
    return TuneResult(profile, model, fitted, len(dev), asked, measured)


def tune_or_fall_back(kb: KnowledgeBase, golden: Sequence[GoldenQuestion],
                      options: TuneOptions) -> tuple[Profile, TuneResult | None, str | None]:
    """``tune`` as a benchmark runs it on a sample of questions: with too few dev questions, the shipped model and
    rules from what dev there is; with none, a profile tuned on nothing (the shipped model, the question as written
    everywhere, no τ). Returns the profile, tune's result (None when tuned on nothing) and what fell back, if
    anything."""
    try:
        result = tune(kb, golden, options)
        return result.profile, result, None
    except TooFewQuestions as error:
        result = tune(kb, golden, replace(options, fit_model=False, min_dev=1))
        return result.profile, result, f"{error}; tuned with the shipped relevance model instead"
    except NoDevQuestions:
        untuned = _profile(kb, default_model(), "as_written", {})
        return (untuned.model_copy(update={"budget": _budget(options, 0)}), None,
                "no dev question in this sample; its tuned profile is tuned on nothing (the shipped model, the "
                "question as written)")


def write_profile(profile: Profile, path: Path) -> None:
    path.write_text(yaml.safe_dump(profile.model_dump(mode="json"), sort_keys=False, allow_unicode=True),
                    encoding="utf-8")


def summary_lines(result: TuneResult) -> list[str]:
    """The profile as a person reads it: which rule each cell got, from how much evidence."""
    profile = result.profile
    chosen = (f"Relevance model: the shipped one, a refit {result.fit['refit']}." if "refit" in result.fit else
              f"Relevance model: {result.fit.get('variant')} (cross-validated MRR on dev: "
              f"{result.fit.get('cv_mrr', '–')}; the model least fitted to these questions within one standard error "
              f"of the best, {result.fit.get('best', '–')}), "
              f"{'chosen' if result.fit.get('variant') == 'shipped' else 'fitted'} on {result.dev} dev rows "
              f"({result.questions} questions)." +
              (f" A refit of every feature was {result.fit['full_refit']}." if "full_refit" in result.fit else ""))
    lines = [f"# tuned profile: {profile.kb}", "", chosen, "",
             f"Options measured on dev ({profile.objective}, LLM calls per question): " +
             ", ".join(f"{o} {m[profile.objective]:.3f} / {m['llm_calls']:.2f}" for o, m in result.options.items()), "",
             "| rule | option | τ | k | dev questions | from | selection check |", "|---|---|---|---|---|---|---|"]
    rules = [("global", profile.global_rule), *sorted(profile.kbs.items()), *sorted(profile.cells.items())]
    checked = profile.budget.get("selection_check", True)
    for key, rule in rules:
        lines.append(f"| {key.replace(ANY, 'no country')} | {rule.option} | "
                     f"{'–' if rule.threshold is None else f'{rule.threshold:.4f}'} | {rule.k or '–'} | {rule.n_dev} | "
                     f"{rule.source} | {_check(rule, checked)} |")
    return lines


def _check(rule: CellRule, checked: bool) -> str:
    """What choosing on half the dev questions gained on the other half (``choose.held_out_gain``); "off" where
    ``tune --no-selection-check`` left every choice unchecked."""
    check = rule.selection_check
    if check is None:
        return "–" if checked else "off"
    gain = f"{check.held_out_gain:+.3f} over {check.over} on held-out halves"
    return f"refused {check.refused}: {gain}" if check.refused else gain
