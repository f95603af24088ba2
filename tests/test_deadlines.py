"""Deadlines stop work on every path: a non-streamed answer stops where the deadline finds it and is not
cached; a search checks its deadline before each costly stage; a request's work is called off when its
client goes away; long questions take one slot at a time. (What this costs in CPU-seconds and memory
after a burst of 504s is measured by benchmarks/attack.py, not asserted here.)"""
from __future__ import annotations

import asyncio
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from babelrag import deadline
from babelrag.concurrency import in_order
from babelrag.kb import KnowledgeBase
from babelrag.server.service import Busy, Gate, Service
from babelrag.server.streaming import run
from conftest import SMALL_LLM, need_llm


def test_a_non_streamed_answer_stops_at_its_deadline_and_is_never_cached() -> None:
    need_llm()
    from babelrag.models.llm import build_llm

    llm = build_llm(SMALL_LLM)
    messages = [{"role": "user", "content": "Write a very long story about a pharmacy in Stockholm, chapter by chapter."}]
    with deadline.limit(1.0):
        completion = llm.complete(messages, max_tokens=512)
    assert completion.stopped and completion.completion_tokens < 512
    cache = llm.inner  # Bounded → CachedLLM
    assert cache._get(cache._key(messages, None, 512, 0)) is None


def test_a_search_checks_its_deadline_before_each_costly_stage(xquad_store: str) -> None:
    with KnowledgeBase.open("xq", xquad_store) as kb, deadline.limit(deadline.Budget(0.0)):
        with pytest.raises(deadline.DeadlineExceeded, match="embedding the question"):
            kb.query_vectors(["a question never embedded before"])
        with pytest.raises(deadline.DeadlineExceeded, match="searching the index"):
            kb.collection.query([], None, 10)
    started: list[int] = []
    budget = deadline.Budget(10.0)
    with deadline.limit(budget), pytest.raises(deadline.DeadlineExceeded):
        with in_order(lambda i: started.append(i) or budget.cancel() or deadline.check("item"), range(50), 2) as done:
            list(done)
    assert len(started) <= 2  # queued items never start once the deadline is called off


def test_work_is_called_off_when_the_client_goes_away() -> None:
    steps: list[int] = []

    def work() -> None:
        for step in range(100):  # 5 s of work, checking its deadline as every stage does
            deadline.check("the next step")
            steps.append(step)
            time.sleep(0.05)

    class Leaving:
        async def receive(self) -> dict:
            await asyncio.sleep(0.2)
            return {"type": "http.disconnect"}

    async def request() -> None:
        with pytest.raises(Exception):  # noqa: B017,PT011 - answered 504: nobody listens any more
            await run(30.0, work, Leaving())  # type: ignore[arg-type]
        await asyncio.sleep(0.3)
    asyncio.run(request())
    assert len(steps) < 100
    settled = len(steps)
    time.sleep(0.3)
    assert len(steps) == settled  # stopped, not running on for nobody


def test_long_questions_take_one_slot_at_a_time(tmp_path: Path) -> None:
    service = Service(str(tmp_path / "store"), tmp_path, frozenset())
    service.long_questions = Gate(1, 0)
    kb = SimpleNamespace(query_embedder=SimpleNamespace(token_count=len))  # a token per character
    with service.long_questions.enter():  # a long question holds the slot
        with pytest.raises(Busy):
            with service.embedding_slot(kb, "y" * 2000):
                pass
        with service.embedding_slot(kb, "a short question"):  # short ones never wait
            pass
