"""A trace as plain data: ``Trace.to_dict`` copies its step records by hand, and must give what ``asdict`` gives."""
from __future__ import annotations

from collections import OrderedDict, namedtuple
from dataclasses import asdict

import numpy as np

from babelrag.types import Failure, LLMCall, PassageFilter, Step, Trace

Pair = namedtuple("Pair", "left right")


def _trace() -> Trace:
    """Records shaped like a search's (rankings as [id, score] lists, nested dicts, tuples) and the kinds a record
    could also hold: a dataclass, a namedtuple, an ordered dict, a set, numpy numbers, None and booleans."""
    ranking = {"label": "as_written/dense", "scorer": "cosine", "hits": [["p1", 0.91234], ["p2", 0.5]]}
    return Trace(
        steps=[Step("retrieve", "as_written", 0.25, {"filter": "PassageFilter()", "arms": [ranking, dict(ranking)],
                                                     "vanished": 2}),
               Step("analyze", "as_written", 0.01, {"terms": ["berlin", "hauptstadt"], "pieces": (("q", "de"),),
                                                    "filter": PassageFilter(langs=("de",)), "pair": Pair(1, [2]),
                                                    "ordered": OrderedDict(b=[1], a=2), "seen": {3, 1},
                                                    "score": np.float64(0.5), "count": np.int64(3),
                                                    "none": None, "flag": True, 7: "int key"})],
        llm_calls=[LLMCall("translate", "qwen", 10, 5, 0.3, cached=True)],
        failures=[Failure("translate", "loop", "the question as written")])


def _same(mine: object, theirs: object) -> None:
    """Equal, and of the same type all the way down, keys in the same order (``==`` alone takes 1 for True, a
    float for a numpy float and a dict for any mapping)."""
    assert type(mine) is type(theirs), (mine, theirs)
    if isinstance(mine, dict):
        assert list(mine) == list(theirs)
        for key in mine:
            _same(mine[key], theirs[key])
    elif isinstance(mine, (list, tuple)):
        assert len(mine) == len(theirs)
        for left, right in zip(mine, theirs):
            _same(left, right)
    else:
        assert mine == theirs


def test_trace_to_dict_is_what_asdict_gives() -> None:
    trace = _trace()
    plain = trace.to_dict()
    _same(plain, {"steps": [asdict(s) for s in trace.steps], "llm_calls": [asdict(c) for c in trace.llm_calls],
                  "failures": [asdict(f) for f in trace.failures]})
    data = plain["steps"][1]["data"]
    assert data["filter"] == asdict(PassageFilter(langs=("de",)))  # a dataclass as a dict, as asdict makes it
    assert type(data["pair"]) is Pair and type(data["ordered"]) is OrderedDict and type(data["pieces"]) is tuple


def test_trace_to_dict_copies_what_it_gives() -> None:
    """A caller changing the copy (the service edits it before answering) never changes the trace."""
    trace = _trace()
    plain = trace.to_dict()
    plain["steps"][0]["data"]["arms"][0]["hits"][0][1] = 0.0
    plain["steps"][0]["data"]["arms"].append("extra")
    plain["steps"][1]["data"]["pair"].right.append(3)
    plain["steps"][1]["data"]["seen"].add(9)
    plain["steps"][1]["data"]["ordered"]["c"] = 3
    assert trace.to_dict() == _trace().to_dict()
    assert trace.steps[0].data["arms"][0]["hits"][0][1] == 0.91234 and len(trace.steps[0].data["arms"]) == 2
    assert trace.steps[1].data["pair"].right == [2] and trace.steps[1].data["seen"] == {3, 1}
    assert list(trace.steps[1].data["ordered"]) == ["b", "a"]
