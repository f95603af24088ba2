"""Questions in flight at once: the run folder, its order and every trace are a sequential run's."""
from __future__ import annotations

import hashlib
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from babelrag.experiments.squad import load_squad_folder
from babelrag.config import preset_config
from babelrag.evaluate.golden import GoldenQuestion
from babelrag.evaluate.runs import COMPLETE, default_concurrency, run_config
from babelrag.models.llm_types import Completion
from babelrag.models.registry import register_llm

pytestmark = pytest.mark.slow
# clock readings, and which of two questions sharing a call paid for it (the other found it cached)
TIMES = {"latency_ms", "retrieval_ms", "model_ms", "seconds", "llm_seconds", "cached", "llm_cached"}


class Jittery:
    """Deterministic answers after a delay that depends on the request, so concurrent questions finish
    out of order; counts how many requests overlapped."""

    slots = 4

    def __init__(self, name: str):
        self.name, self.in_flight, self.most = name, 0, 0
        self._lock = threading.Lock()

    def complete(self, messages: list[dict[str, str]], json_schema: dict[str, Any] | None = None,
                 max_tokens: int = 256, temperature: float = 0.0, seed: int = 0) -> Completion:
        key = int(hashlib.sha256(json.dumps(messages).encode()).hexdigest()[:6], 16)
        with self._lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        passage = "translation engine" in messages[0]["content"] and "JSON" not in messages[0]["content"]
        time.sleep((key % 7) / 200 + (0.15 if passage else 0))  # long enough for questions sharing one to overlap
        with self._lock:
            self.in_flight -= 1
        user = messages[-1]["content"]
        if "translation engine" in messages[0]["content"]:  # an English text of its own for every source
            english = f"This text number {key % 9973} tells the history of the city and the people who lived there."
            text = json.dumps({"translation": english}) if "JSON" in messages[0]["content"] else english
        else:
            text = f"Answer {key % 1000} [1]"
        return Completion(text, len(user) // 4, 12, 0.05, self.name)

    def stream(self, messages, on_text, max_tokens=256, temperature=0.0, seed=0) -> Completion:  # noqa: ANN001
        completion = self.complete(messages, max_tokens=max_tokens)
        on_text(completion.text)
        return completion


def _untimed(value: Any) -> Any:
    """A row or trace without what concurrency may change: clock readings, and who paid a shared call."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items()
                if k not in TIMES and "_ms" not in k and not k.startswith(("latency", "llm_seconds"))}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


@pytest.fixture
def jittery():  # noqa: ANN201
    llm = Jittery("jittery-concurrency")
    register_llm(llm.name, llm)
    yield llm
    register_llm(llm.name, None)


def _paid(rows: list[dict[str, Any]]) -> int:
    return sum(not c["cached"] for r in rows for c in r["trace"]["llm_calls"])


def test_concurrent_eval_writes_the_sequential_run(xquad_store: str, small_xquad: list[Path], tmp_path: Path,
                                                   jittery: Jittery, monkeypatch: pytest.MonkeyPatch) -> None:
    from babelrag.models import registry

    def fresh_caches(name: str) -> None:  # each run starts with empty translation and embedding caches
        monkeypatch.setenv("BABELRAG_HOME", str(tmp_path / f"home-{name}"))
        registry._translator.cache_clear()

    corpus = load_squad_folder(small_xquad[0].parent)
    golden = [GoldenQuestion(id=f"{q.lang}:{q.qid}", question=q.text, lang=q.lang, kb="xq", gold_pages=(q.page,))
              for lang in ("de", "th", "zh") for q in [q for q in corpus.questions if q.lang == lang][:4]]
    config = preset_config("english-translation", {"llm": jittery.name, "context": "crossrag", "generate_k": 2})
    assert default_concurrency(config, answer=True) == 4  # the model's slots
    assert default_concurrency(preset_config("hybrid"), answer=False) == 1  # retrieval alone: clean latencies

    fresh_caches("seq")
    sequential = run_config("seq", config, golden, tmp_path / "seq", xquad_store, answer=True, concurrency=1)
    one_question, jittery.most = jittery.most, 0
    assert one_question <= 2  # one question at a time: at most its two passages translated together
    fresh_caches("par")
    concurrent = run_config("seq", config, golden, tmp_path / "par", xquad_store, answer=True, concurrency=4)
    assert jittery.most > one_question  # questions really overlapped
    assert sum(r["llm_calls"] for r in sequential.rows) >= 2 * len(golden)  # translation and answer, at least
    assert _untimed(concurrent.rows) == _untimed(sequential.rows)
    translated = [p for r in sequential.rows for p in r["evidence"] if p["lang"] != "en"]
    assert translated and not any(f["stage"] == "translate" for r in sequential.rows for f in r["trace"]["failures"])
    assert sum(r["llm_cached"] for r in sequential.rows) > 0  # questions share passages: their translations too
    assert _paid(concurrent.rows) == _paid(sequential.rows)  # ...and a shared call is paid once, in flight or not
    lines = [json.loads(line)["id"] for line in (tmp_path / "par" / "traces.jsonl").read_text().splitlines()]
    assert lines == [q.id for q in golden]  # written in question order, whatever finished first
    assert concurrent.metrics["timing"]["concurrency"] == 4 and "in_flight" in concurrent.metrics["timing"]
    assert _untimed(concurrent.metrics["overall"]) == _untimed(sequential.metrics["overall"])

    # interrupted mid-run: five questions written, the sixth cut mid-line; resuming concurrently fills the rest
    traces = tmp_path / "par" / "traces.jsonl"
    kept = traces.read_text().splitlines()
    traces.write_text("\n".join(kept[:5]) + "\n" + kept[5][:50])
    (tmp_path / "par" / COMPLETE).unlink()
    fresh_caches("resumed")
    resumed = run_config("seq", config, golden, tmp_path / "par", xquad_store, answer=True, concurrency=3)
    assert _untimed(resumed.rows) == _untimed(sequential.rows)
    assert [json.loads(line)["id"] for line in traces.read_text().splitlines()] == [q.id for q in golden]


def test_concurrent_preference_measures_what_a_sequential_one_does(xquad_store: str, small_xquad: list[Path]) -> None:
    from babelrag.analysis.preference import PreferenceOptions, analyze_preference
    from babelrag.kb import KnowledgeBase

    corpus = load_squad_folder(small_xquad[0].parent)
    golden = [GoldenQuestion(id=f"{q.lang}:{q.qid}", question=q.text, lang=q.lang, kb="xq", gold_pages=(q.page,),
                             tags={"qid": q.qid}) for q in corpus.questions if q.lang in ("en", "de", "ar")]
    options = PreferenceOptions(targets="all", per_lang=3, translator="parallel", cultural=False)
    with KnowledgeBase.open("xq", xquad_store) as kb:
        alone = analyze_preference(kb, golden, options)
        together = analyze_preference(kb, golden, PreferenceOptions(**{**options.__dict__, "concurrency": 3}))
    assert alone["questions"] == 9 and alone["mlrs"]
    assert together["options"]["concurrency"] == 3
    same = [json.dumps(_untimed({k: v for k, v in r.items() if k != "options"}), sort_keys=True, default=str)
            for r in (alone, together)]  # as JSON: a NaN correlation equals itself there
    assert same[0] == same[1]
