"""One answering step (default DKM-RAG) on the same questions under an earlier commit and under this
checkout, one after the other in one run: what the code's generation limits and batching changed.

Each version runs in a process of its own with its own ``src`` first on the path (the earlier one
from a temporary git worktree; the installed packages are today's), a fresh ``$BABELRAG_HOME`` (no
cache, no index of the other), the LLM cache off, one question at a time. The questions are the
first N of this checkout's test split (country KBs, not asked in English: passages get translated,
in hash order) that the earlier version's benchmark data also holds. Retrieval may differ between
versions (the earlier ranking may hand the step other passages), so besides the step's total model
time the report gives the cost per call of each role (translator, rewriter, generator, ...) and a
least-squares cost model (seconds = a·prompt tokens + b·generated tokens) per version: a change in
what a call costs is the code's doing, a change in how many calls a question makes is the retrieval's.

With ``--concurrency N`` this checkout runs N questions in flight on an N-slot model (the earlier
one as it ran, one at a time): the wall-time ratio is then what generation limits and batching
bought together; per-call seconds include sharing the cores and are not comparable then.

Run: python benchmarks/llm_versions.py [--baseline 4959393] [--preset multirag+dkm] [--questions 8]
        [--concurrency 1] [--model qwen2.5-coder-0.5b] [--out runs/llm-versions]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]
DATA = (ROOT / ".." / "shared" / "data").resolve()


def driver(mode: str, out: Path, ids: list[str], preset: str, model: str, concurrency: int) -> None:
    """Inside one version's process: ``ids`` writes the benchmark data's question ids; ``run`` runs the
    step on ``ids`` and writes its wall time. Only APIs every version has (``concurrency`` > 1 needs
    a version with concurrent evaluation)."""
    import babelrag

    if not Path(babelrag.__file__).resolve().is_relative_to(os.environ["VERSION_SRC"]):
        sys.exit(f"imported {babelrag.__file__}, not the version under {os.environ['VERSION_SRC']}")
    from babelrag.experiments.runner import build_data, ensure_indexes
    from babelrag.config import preset_config
    from babelrag.evaluate.runs import run_config

    bench = build_data(DATA, out / "data", quick=True, seed=13)
    if mode == "ids":
        (out / "ids.json").write_text(json.dumps([q.id for q in bench.golden]))
        return
    by_id = {q.id: q for q in bench.golden}
    questions = [by_id[i] for i in ids]
    store = str(out / "store")
    ensure_indexes({q.index: bench.indexes[q.index] for q in questions}, store)
    config = preset_config(preset, {"llm": model})
    started = time.perf_counter()
    run_config(preset, config, questions, out / "run", store, answer=True,
               **({"concurrency": concurrency} if concurrency > 1 else {}))
    (out / "wall.json").write_text(json.dumps({"seconds": time.perf_counter() - started, "concurrency": concurrency}))


def in_version(src: Path, mode: str, out: Path, ids: list[str], args: argparse.Namespace, concurrency: int = 1) -> None:
    home = out / "home"
    (home / "models").mkdir(parents=True, exist_ok=True)
    for gguf in Path(args.models).glob("*.gguf"):  # the same weights for both versions
        if not (home / "models" / gguf.name).exists():
            (home / "models" / gguf.name).symlink_to(gguf)
    env = dict(os.environ, PYTHONPATH=str(src), VERSION_SRC=str(src.resolve()), BABELRAG_HOME=str(home),
               BABELRAG_LLM_CACHE="0", BABELRAG_MODELS=str(home / "models"), BABELRAG_PROGRESS="0",
               BABELRAG_LLM_SLOTS=str(concurrency))
    subprocess.run([sys.executable, str(HERE), "--driver", mode, "--out", str(out), "--ids", ",".join(ids),
                    "--preset", args.preset, "--model", args.model, "--concurrency", str(concurrency)],
                   env=env, check=True, cwd=tempfile.gettempdir())


def pick(current: Path, baseline: Path, count: int) -> list[str]:
    """The current version's throughput questions (llm_throughput's rule) that the baseline also has."""
    sys.path.insert(0, str(HERE.parent))
    from babelrag.experiments.runner import build_data
    from common import pick_questions

    golden = build_data(DATA, current / "data", quick=True, seed=13).golden
    theirs = set(json.loads((baseline / "ids.json").read_text()))
    return [q.id for q in pick_questions([q for q in golden if q.id in theirs], count)]


def summary(folder: Path) -> dict[str, Any]:
    import numpy as np

    rows = [json.loads(line) for line in (folder / "run" / "traces.jsonl").read_text().splitlines() if line]
    calls = [c for r in rows for c in r["trace"]["llm_calls"] if not c.get("cached")]
    roles: dict[str, list[tuple[int, int, float]]] = defaultdict(list)
    for c in calls:
        roles[c["role"]].append((c["prompt_tokens"], c["completion_tokens"], c["seconds"]))
    tokens = np.array([[c["prompt_tokens"], c["completion_tokens"]] for c in calls], float).reshape(-1, 2)
    seconds = np.array([c["seconds"] for c in calls])
    per_token = np.linalg.lstsq(tokens, seconds, rcond=None)[0] if len(calls) >= 2 else np.array([np.nan] * 2)
    wall = json.loads((folder / "wall.json").read_text())
    return {"questions": len(rows), "wall_s": wall["seconds"], "concurrency": wall["concurrency"],
            "model_s": float(seconds.sum()), "calls": len(calls),
            "prompt": int(tokens[:, 0].sum()), "generated": int(tokens[:, 1].sum()),
            "failures": sum(r.get("failures") or 0 for r in rows),
            "char3": float(np.mean(scored)) if (scored := [r["answer_char3"] for r in rows
                                                           if r.get("answer_char3") is not None]) else float("nan"),
            "ms_per_prompt_token": 1000 * per_token[0], "ms_per_generated_token": 1000 * per_token[1],
            "roles": {role: {"calls": len(v), "prompt_per_call": sum(x[0] for x in v) / len(v),
                             "generated_per_call": sum(x[1] for x in v) / len(v),
                             "s_per_call": sum(x[2] for x in v) / len(v), "s": sum(x[2] for x in v)}
                      for role, v in roles.items()}}


def report(base: dict[str, Any], now: dict[str, Any], baseline: str, out: Path) -> None:
    sys.path.insert(0, str(HERE.parent))
    from common import console, table

    def ratio(a: float, b: float) -> str:
        return f"{a / b:.2f}×" if b else "–"

    head = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True,
                          text=True).stdout.strip()
    table(f"{now['questions']} questions: {baseline} → {head} (ratio = before ÷ after)",
          ["", "before", "after", "ratio"],
          [["questions in flight (and model slots)", base["concurrency"], now["concurrency"], ""],
           ["wall seconds of the questions", f"{base['wall_s']:.1f}", f"{now['wall_s']:.1f}",
            ratio(base["wall_s"], now["wall_s"])],
           ["model seconds (sum over calls)", f"{base['model_s']:.1f}", f"{now['model_s']:.1f}",
            ratio(base["model_s"], now["model_s"])],
           ["LLM calls", base["calls"], now["calls"], ""],
           ["prompt tokens", base["prompt"], now["prompt"], ""],
           ["generated tokens", base["generated"], now["generated"], ratio(base["generated"], now["generated"])],
           ["ms per prompt token (fit)", f"{base['ms_per_prompt_token']:.1f}", f"{now['ms_per_prompt_token']:.1f}", ""],
           ["ms per generated token (fit)", f"{base['ms_per_generated_token']:.1f}",
            f"{now['ms_per_generated_token']:.1f}", ""],
           ["failures", base["failures"], now["failures"], ""],
           ["answer char3", f"{base['char3']:.3f}", f"{now['char3']:.3f}", ""]])
    rows = []
    for role in sorted(set(base["roles"]) | set(now["roles"])):
        b, n = base["roles"].get(role), now["roles"].get(role)
        cell = lambda r, k, f="{:.0f}": f.format(r[k]) if r else "–"  # noqa: E731
        rows.append([role, cell(b, "calls"), cell(n, "calls"), cell(b, "generated_per_call"),
                     cell(n, "generated_per_call"), cell(b, "s_per_call", "{:.1f}"), cell(n, "s_per_call", "{:.1f}"),
                     ratio(b["s_per_call"], n["s_per_call"]) if b and n else "–"])
    table("per call, by role", ["role", "calls before", "after", "generated/call before", "after", "s/call before",
                                "after", "s/call ratio"], rows)
    (out / "summary.json").write_text(json.dumps({"baseline": baseline, "before": base, "after": now}, indent=1))
    console.print(f"written: {out / 'summary.json'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default="4959393", help="the earlier commit (default: the state issue 15 "
                                                               "was written against)")
    parser.add_argument("--preset", default="multirag+dkm")
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    models = os.environ.get("BABELRAG_MODELS") or str(Path.home() / ".babelrag" / "models")
    parser.add_argument("--models", default=models, help="folder of the GGUF weights both versions use")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "llm-versions")
    parser.add_argument("--concurrency", type=int, default=1, help="questions in flight and model slots for this "
                                                                    "checkout's run (the earlier one runs as it did)")
    parser.add_argument("--driver", choices=["ids", "run"], help=argparse.SUPPRESS)
    parser.add_argument("--ids", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.driver:
        driver(args.driver, args.out, [i for i in args.ids.split(",") if i], args.preset, args.model, args.concurrency)
        return
    if not DATA.exists():
        sys.exit(f"no shared data at {DATA}")
    args.out.mkdir(parents=True, exist_ok=True)
    out = Path(tempfile.mkdtemp(prefix="run-", dir=args.out))
    worktree = out / "baseline-src"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "prune"], check=False)  # entries a killed run left
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(worktree), args.baseline],
                   check=True, capture_output=True)
    try:
        before, after = out / "before", out / "after"
        in_version(worktree / "src", "ids", before, [], args)
        ids = pick(after, before, args.questions)
        print(f"{len(ids)} questions: {', '.join(ids)}; output {out}", flush=True)
        in_version(worktree / "src", "run", before, ids, args)  # the earlier version first, then this one
        in_version(ROOT / "src", "run", after, ids, args, args.concurrency)
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(worktree)], check=False)
    report(summary(before), summary(after), args.baseline, out)


if __name__ == "__main__":
    main()
