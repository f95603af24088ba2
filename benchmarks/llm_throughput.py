"""Questions per hour of the answering steps (qa-core) at 1, 2, 4, 8 questions in flight.

Backends, measured at each level on the same questions, one after the other in one run:
- ``inprocess``: the GGUF model in-process (xllamacpp) with N slots (continuous batching);
- ``server``: a real llama.cpp server (the one xllamacpp ships) on loopback with N slots, reached
  through the OpenAI-compatible client;
- ``simulator``: a LATENCY SIMULATOR, not a model: a loopback OpenAI-compatible server that answers
  every request after a fixed 300 ms with the completion recorded for that exact request in this
  benchmark's in-process run at level 1 (which runs first). It looks to the client like a fast
  remote GPU server with room for every request, so it measures the client's concurrency alone.

Level N is what `--concurrency N` with an N-slot model does: N questions in flight, and a question's
per-passage calls N at a time, so a step with per-passage calls can gain more than N on the
simulator. Every call reaches its backend: completion caching is off and each (backend, level,
step) has a model name of its own in a fresh cache folder, so no translation is reused across
measurements. Times are the questions' wall time (KB opening and warm-up apart). Ratios are against
level 1 of the same backend and step. On 2 CPU cores the local backends are compute-bound:
batching can only fill gaps, not multiply the cores, so they run fewer steps and levels by default.
A simulator request that was never recorded fails the benchmark (its fallback would be cheaper).
Run: python benchmarks/llm_throughput.py [--questions 8] [--levels 1,2,4,8] [--local-levels 1,2,4]
        [--backends inprocess,server,simulator] [--steps no-RAG,MultiRAG,CrossRAG,DKM-RAG,QTT-RAG]
        [--local-steps MultiRAG,DKM-RAG] [--recording recorded.json] [--out runs/llm-throughput]
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from common import DATA, ROOT, bench_store, console, need_data, pick_questions, table

os.environ["BABELRAG_BENCH_STORE"] = bench_store()  # the indexes stay shared; every cache below is fresh
os.environ["BABELRAG_MODELS"] = os.environ.get("BABELRAG_MODELS") or str(Path.home() / ".babelrag" / "models")
os.environ["BABELRAG_HOME"] = tempfile.mkdtemp(prefix="babelrag-throughput-")
os.environ["BABELRAG_LLM_CACHE"] = "0"
os.environ.setdefault("BABELRAG_PROGRESS", "0")

from babelrag.experiments.ladders import ladder  # noqa: E402
from babelrag.experiments.runner import build_data, ensure_indexes  # noqa: E402
from babelrag.config import preset_config  # noqa: E402
from babelrag.evaluate.runs import run_config  # noqa: E402
from babelrag.json_store import digest  # noqa: E402
from babelrag.models.catalog import model_path  # noqa: E402
from babelrag.models.llm import LocalLLM, OpenAILLM  # noqa: E402
from babelrag.models.llm_types import LLM, Completion, Message, OnText  # noqa: E402
from babelrag.models.registry import register_llm  # noqa: E402

LATENCY = 0.3  # seconds per simulated request
RUN = secrets.token_hex(3)  # names this run's models: no cache entry of an earlier run can match


def request_key(messages: list[Message], schema: dict[str, Any] | None, max_tokens: int, seed: int) -> str:
    return digest([messages, schema, max_tokens, seed])


class Recorder:
    """Any LLM, remembering each completion by its request (for the simulator to replay). The first
    answer to a request is kept: llama.cpp may answer the same request differently later (a reused
    prompt prefix changes the arithmetic), and the steps after it were built on the first one."""

    def __init__(self, inner: LLM, name: str, recorded: dict[str, dict[str, Any]]):
        self.inner, self.name, self.slots, self.recorded = inner, name, getattr(inner, "slots", 1), recorded
        self.repeated = self.diverged = 0

    def _keep(self, key: str, completion: Completion) -> None:
        if key in self.recorded:
            self.repeated += 1
            self.diverged += self.recorded[key]["text"] != completion.text
            return
        self.recorded[key] = {"text": completion.text, "prompt_tokens": completion.prompt_tokens,
                              "completion_tokens": completion.completion_tokens, "finish": completion.finish}

    def complete(self, messages: list[Message], json_schema: dict[str, Any] | None = None, max_tokens: int = 256,
                 temperature: float = 0.0, seed: int = 0) -> Completion:
        completion = self.inner.complete(messages, json_schema, max_tokens, temperature, seed)
        self._keep(request_key(messages, json_schema, max_tokens, seed), completion)
        return completion

    def stream(self, messages: list[Message], on_text: OnText, max_tokens: int = 256, temperature: float = 0.0,
               seed: int = 0) -> Completion:
        completion = self.inner.stream(messages, on_text, max_tokens, temperature, seed)
        self._keep(request_key(messages, None, max_tokens, seed), completion)
        return completion


class Simulator:
    """The latency simulator: a threaded loopback HTTP server replaying recorded completions after
    ``LATENCY`` seconds (JSON or one server-sent event); a request never recorded gets a 404, counted."""

    def __init__(self, recorded: dict[str, dict[str, Any]]):
        self.recorded, self.misses, self.requests, self.missed = recorded, 0, 0, []
        self.lock = threading.Lock()
        simulator = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - the http.server hook
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                time.sleep(LATENCY)
                schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema")
                hit = simulator.recorded.get(request_key(body["messages"], schema, body["max_tokens"], body["seed"]))
                with simulator.lock:
                    simulator.requests += 1
                if hit is None:
                    with simulator.lock:
                        simulator.misses += 1
                        simulator.missed.append(body)
                    self.send_response(404)
                    self.end_headers()
                    return
                usage = {"prompt_tokens": hit["prompt_tokens"], "completion_tokens": hit["completion_tokens"]}
                finish = hit.get("finish") or None
                if body.get("stream"):
                    chunk = {"choices": [{"delta": {"content": hit["text"]}, "finish_reason": finish}], "usage": usage}
                    payload = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
                    kind = "text/event-stream"
                else:
                    payload = json.dumps({"choices": [{"message": {"content": hit["text"]}, "finish_reason": finish}],
                                          "usage": usage}).encode()
                    kind = "application/json"
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()


def llama_server(model: Path, slots: int) -> tuple[Any, str, str]:
    """A llama.cpp HTTP server on loopback with ``slots`` slots and a key of its own."""
    import xllamacpp

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    key = secrets.token_urlsafe(16)
    params = xllamacpp.CommonParams()
    params.model.path, params.n_ctx, params.n_parallel = str(model), 8192 * slots, slots
    params.verbosity, params.warmup, params.port, params.hostnames = -1, False, port, ["127.0.0.1"]
    params.api_keys = [key]
    threads = os.cpu_count() or 2
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = threads
    return xllamacpp.Server(params), f"http://127.0.0.1:{port}/v1", key


def backend_llm(backend: str, level: int, model: Path, recorded: dict[str, dict[str, Any]],
                simulator: Simulator | None) -> tuple[LLM, Any]:
    """The model behind one measurement, and what must stay alive while it is used."""
    if backend == "inprocess":
        local = LocalLLM(str(model), slots=level)
        return (Recorder(local, "recording", recorded) if level == 1 else local), local
    if backend == "server":
        server, url, key = llama_server(model, level)
        os.environ[f"THROUGHPUT_KEY_{level}"] = key
        # prefix reuse off, as in-process: with it on, a request's answer depends on what ran before
        return OpenAILLM(url, "qwen", api_key_env=f"THROUGHPUT_KEY_{level}", slots=level,
                         extra_body={"cache_prompt": False}), server
    assert simulator is not None
    return OpenAILLM(simulator.url, "simulator", slots=level), None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--levels", default="1,2,4,8", help="questions in flight (and model slots)")
    parser.add_argument("--local-levels", default="1,2,4", help="levels for the CPU backends (2 cores)")
    parser.add_argument("--backends", default="inprocess,server,simulator")
    parser.add_argument("--steps", default="no-RAG,MultiRAG,CrossRAG,DKM-RAG,QTT-RAG")
    parser.add_argument("--local-steps", default="MultiRAG,DKM-RAG", help="steps measured on the CPU backends")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "llm-throughput")
    parser.add_argument("--recording", type=Path, help="recorded.json of an earlier run on the same questions: "
                                                        "the simulator replays it (no in-process recording run)")
    args = parser.parse_args()
    need_data()
    levels = sorted({int(v) for v in args.levels.split(",")} | {1})
    local_levels = sorted({int(v) for v in args.local_levels.split(",")} | {1})
    backends = [b.strip() for b in args.backends.split(",")]
    steps = [s for s in ladder("qa-core") if s.name in args.steps.split(",")]
    if not steps:
        sys.exit(f"--steps: none of {args.steps} is a qa-core step ({', '.join(s.name for s in ladder('qa-core'))})")
    local_steps = [s for s in steps if s.name in args.local_steps.split(",")]
    model = model_path(args.model)
    out = args.out / RUN
    bench = build_data(DATA, out / "data", quick=True, seed=13)
    questions = pick_questions(bench.golden, args.questions)
    store = os.environ["BABELRAG_BENCH_STORE"]
    ensure_indexes({q.index: bench.indexes[q.index] for q in questions}, store)
    recorded: dict[str, dict[str, Any]] = json.loads(args.recording.read_text()) if args.recording else {}
    record = "simulator" in backends and not recorded
    console.print(f"{len(questions)} questions ({', '.join(q.id for q in questions)}); backends {backends}; "
                  f"output {out}")
    plan: list[tuple[str, int, list[Any]]] = []  # in-process at 1 first: it records what the simulator replays
    if "inprocess" in backends or record:
        plan += [("inprocess", 1, steps if record else local_steps)]
        plan += [("inprocess", level, local_steps) for level in local_levels[1:] if "inprocess" in backends]
    plan += [("server", level, local_steps) for level in local_levels if "server" in backends]
    plan += [("simulator", level, steps) for level in levels if "simulator" in backends]
    results: list[dict[str, Any]] = []
    for backend, level, measured in plan:
        simulator = Simulator(recorded) if backend == "simulator" else None
        llm, alive = backend_llm(backend, level, model, recorded, simulator)
        try:
            for step in measured:
                # a name per backend, level and step: no translation made in one measurement serves another
                name = f"{backend}-c{level}-{step.name}-{RUN}"
                llm.name = name
                register_llm(name, llm)
                config = preset_config(step.preset, dict(step.overrides, llm=name))
                misses_before = simulator.misses if simulator else 0
                run = run_config(step.name, config, questions, out / backend / f"c{level}" / step.name, store,
                                 answer=True, concurrency=level)
                register_llm(name, None)
                seconds = run.metrics["timing"]["questions_seconds"]  # the questions' wall time, setup apart
                row = {"backend": backend, "level": level, "step": step.name, "seconds": seconds,
                       "questions_per_hour": len(questions) * 3600 / seconds,
                       "llm_calls": sum(r["llm_calls"] for r in run.rows),
                       "completion_tokens": sum(c["completion_tokens"] for r in run.rows
                                                for c in r["trace"]["llm_calls"]),
                       "failures": sum(r["failures"] for r in run.rows),
                       "char3": run.metrics["overall"].get("answer_char3"),
                       "simulator_misses": (simulator.misses - misses_before) if simulator else None}
                results.append(row)
                console.print(f"{backend} c{level} {step.name}: {seconds:.1f} s, {row['questions_per_hour']:.0f} q/h, "
                              f"{row['llm_calls']} calls, {row['failures']} failures")
            if isinstance(llm, Recorder):
                (out / "recorded.json").write_text(json.dumps(recorded))
                console.print(f"recording: {len(recorded)} requests; {llm.repeated} asked again, {llm.diverged} of "
                              f"them answered differently the second time (llama.cpp prompt-prefix reuse)")
        finally:
            if simulator is not None:
                (out / "misses.json").write_text(json.dumps(simulator.missed, ensure_ascii=False, indent=1))
                simulator.close()
            del llm, alive
    report(results, levels, len(questions), out)
    if missed := sum(r["simulator_misses"] or 0 for r in results):
        sys.exit(f"the simulator met {missed} requests never recorded ({out / 'misses.json'}): its runs took "
                 f"fallbacks the recorded run did not, so their speed-ups are not comparable")


def report(results: list[dict[str, Any]], levels: list[int], questions: int, out: Path) -> None:
    (out / "throughput.json").write_text(json.dumps(results, indent=2))
    rows = []
    for backend in dict.fromkeys(r["backend"] for r in results):
        mine = [r for r in results if r["backend"] == backend]
        mine_levels = sorted({r["level"] for r in mine})
        everywhere = [s for s in dict.fromkeys(r["step"] for r in mine)  # "all steps": those measured at every level
                      if all(any(r["step"] == s and r["level"] == level for r in mine) for level in mine_levels)]
        for step in [*dict.fromkeys(r["step"] for r in mine), "all steps"]:
            counted = everywhere if step == "all steps" else [step]
            seconds = {level: sum(r["seconds"] for r in mine if r["level"] == level and r["step"] in counted)
                       for level in mine_levels}
            base = seconds.get(1)
            if not base:
                continue
            rows.append([f"{backend} · {step}", f"{questions * 3600 / base:.0f}",
                         *[f"{base / seconds[level]:.2f}×" if seconds.get(level) else "–" for level in levels]])
    table(f"questions per hour at concurrency 1 and the speed-up at each level ({questions} questions, same run)",
          ["backend · step", "q/h at 1", *[f"×{level}" for level in levels]], rows)
    parity = [[f"{r['backend']} · {r['step']}", r["level"], r["llm_calls"], r["completion_tokens"], r["failures"],
               "–" if r["char3"] is None else f"{r['char3']:.3f}"] for r in results]
    table("quality parity: the same questions at each level (calls, tokens, failures, answer char-3-gram recall)",
          ["backend · step", "level", "calls", "tokens", "failures", "char3"], parity)
    console.print(f"written: {out / 'throughput.json'}")


if __name__ == "__main__":
    main()
