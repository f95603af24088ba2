"""The attacks of benchmarks/attack.py that need load, state or a clock: giant bodies (with and without a
key), deadline tails (the server's CPU-seconds and memory after a burst of 504s), a non-streamed answer
past its deadline, searches during a first ingest, rebuild and copy name collisions, and the broken
KBs and run folders the cases then query. The server's CPU and memory are read from /proc."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from attack_cases import BROKEN_KBS, DOCS, GARBAGE_RUN, KEY, STALE_KB, STALE_VERSION

JAPANESE = "東京大学の研究者は新しい技術を開発しましたがそれは世界で初めてのことでした"


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def settled_cpu(pid: int, idle_rate: float, quiet: float = 0.15, most: float = 240.0) -> tuple[float, float]:
    """CPU-seconds the server spends from now until it is idle again (beyond its idle rate: the probe's
    requests), and the seconds that took."""
    start_cpu, start = cpu_seconds(pid), time.monotonic()
    last = start_cpu
    while time.monotonic() - start < most:
        time.sleep(2.0)
        now = cpu_seconds(pid)
        if now - last - 2.0 * idle_rate < quiet:
            break
        last = now
    seconds = time.monotonic() - start
    return max(0.0, cpu_seconds(pid) - start_cpu - idle_rate * seconds), seconds


def idle_rate(pid: int, seconds: float = 4.0) -> float:
    before = cpu_seconds(pid)
    time.sleep(seconds)
    return (cpu_seconds(pid) - before) / seconds


def giant_body(deep: bool = False) -> bytes:
    """A /search body with a 3-million-element array, or (``deep``) ~1 million 19-deep but legal lists."""
    if deep:
        junk = b",".join([b"[" * 19 + b"0" + b"]" * 19] * 250_000)
    else:
        junk = b",".join([b"0"] * 3_000_000)
    return b'{"kb":"pharma","question":"x","junk":[' + junk + b"]}"


def giant_bodies(base: str, count: int, headers: dict[str, str], deep: bool = False) -> list[object]:
    """``count`` giant bodies at /search at once; their statuses."""
    body = giant_body(deep)

    def send(_: int) -> object:
        try:
            return httpx.post(f"{base}/search", content=body, timeout=60,
                              headers={**headers, "Content-Type": "application/json"}).status_code
        except httpx.TransportError as error:  # a server may close the connection on an unread body
            return type(error).__name__
    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(send, range(count)))


def deadline_tail(base: str, pid: int, count: int = 48) -> dict[str, object]:
    """``count`` 2,000-character Japanese questions at once (each ~4 CPU-seconds of embedding): the
    statuses, the CPU-seconds the server spent after the last answer, per 504, and its memory before
    (after one such question) and after the burst."""
    long_question = (JAPANESE * 40)[:2000]
    httpx.post(f"{base}/search", json={"kb": "pharma", "question": long_question[::-1]}, timeout=120)
    rate = idle_rate(pid)
    rss_before = rss_mb(pid)

    def ask(i: int) -> int:
        question = (JAPANESE[i % len(JAPANESE):] + JAPANESE * 40)[:2000]
        return httpx.post(f"{base}/search", json={"kb": "pharma", "question": question}, timeout=300).status_code
    with ThreadPoolExecutor(count) as pool:
        statuses = list(pool.map(ask, range(count)))
    after, seconds = settled_cpu(pid, rate)
    timed_out = statuses.count(504)
    return {"statuses": dict(sorted({s: statuses.count(s) for s in statuses}.items())), "504s": timed_out,
            "cpu_after": after, "settle_s": seconds, "cpu_per_504": after / timed_out if timed_out else 0.0,
            "rss_before": rss_before, "rss_after": rss_mb(pid)}


def answer_tail(base: str, pid: int) -> dict[str, object]:
    """A non-streamed answer asked for 512 tokens on a server with a short deadline: when it is answered,
    the CPU-seconds after that, and whether asking again is answered from a cache (a cut answer cached)."""
    body = {"kb": "pharma", "question": "Skriv alla heltal från 1 till 1000 i ordning, åtskilda med kommatecken.",
            "preset": "norag", "settings": {"answer_tokens": 512}}
    rate = idle_rate(pid, 2.0)
    started = time.monotonic()
    first = httpx.post(f"{base}/ask", json=body, timeout=300)
    answered = time.monotonic() - started
    after, _ = settled_cpu(pid, rate)
    started = time.monotonic()
    again = httpx.post(f"{base}/ask", json=body, timeout=300)
    cut = first.status_code != 200 or any("cut off" in w for w in first.json().get("warnings", []))
    return {"status": first.status_code, "answered_s": answered, "cpu_after": after, "cut": cut,
            "again_status": again.status_code, "again_s": time.monotonic() - started}


def searches_during_first_ingest(base: str, store: str, count: int = 33) -> dict[object, int]:
    """A first ingest of 800 documents into a new KB, and ``count`` searches of it once its folder exists."""
    big = [{"id": f"f-{i}", "text": f"Dokument {i} om apotek och öppettider.", "lang": "sv"} for i in range(800)]
    writer = threading.Thread(target=lambda: httpx.post(f"{base}/kbs/fresh/documents", json=big,
                                                        headers={"X-API-Key": KEY}, timeout=600), daemon=True)
    writer.start()
    for _ in range(1200):
        if (Path(store) / "fresh").exists():
            break
        time.sleep(0.05)

    def search(_: int) -> object:
        try:
            return httpx.post(f"{base}/search", json={"kb": "fresh", "question": "apotek"}, timeout=120).status_code
        except httpx.TransportError as error:
            return type(error).__name__
    with ThreadPoolExecutor(count) as pool:
        statuses = list(pool.map(search, range(count)))
    writer.join(600)
    return {s: statuses.count(s) for s in set(statuses)}


def _babelrag(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "babelrag", *args], capture_output=True, text=True,
                          env=dict(os.environ, BABELRAG_PROGRESS="0"))


def _documents(store: str) -> dict[str, object]:
    listed = json.loads(_babelrag("kbs", "--json", "--store", store).stdout or "[]")
    return {k["kb"]: k.get("documents", k.get("warning")) for k in listed}


def name_collisions(folder: Path) -> list[list[object]]:
    """Rebuild and copy next to KBs whose names a naive staging scheme would take: each untouched."""
    source = folder / "small.jsonl"
    source.write_text("\n".join(json.dumps(d, ensure_ascii=False) for d in DOCS[:3]), encoding="utf-8")
    other = folder / "other.jsonl"
    other.write_text(json.dumps({"id": "o", "text": "Ett annat dokument.", "lang": "sv"}), encoding="utf-8")
    store, target = str(folder / "names"), str(folder / "names-copy")
    bystanders = ("kb1.old", "kb1.rebuild", "kb1.copy", "_rebuild.kb1")
    for name in (*bystanders, "kb1"):
        _babelrag("index", str(source), "--kb", name, "--store", store)
        _babelrag("index", str(source), "--kb", name, "--store", target)
    before = _documents(store)
    _babelrag("index", str(other), "--kb", "kb1", "--store", store, "--rebuild")
    _babelrag("delete", "--kb", "kb1", "--all", "--store", target)
    _babelrag("copy", "--kb", "kb1", "--to", target, "--store", store)
    after, copied = _documents(store), _documents(target)
    rows = [[f"rebuild kb1: {name}", before.get(name), after.get(name), "ok" if after.get(name) == before.get(name)
             else "VIOLATION"] for name in bystanders if name in before]
    rows += [[f"copy kb1: {name}", before.get(name), copied.get(name), "ok" if copied.get(name) == before.get(name)
              else "VIOLATION"] for name in bystanders if name in before]
    rows.append(["rebuild kb1: kb1 itself", before.get("kb1"), after.get("kb1"), "ok" if after.get("kb1") == 1
                 else "VIOLATION"])
    rows.append(["'_rebuild.kb1' refused as a name", "", "refused" if "_rebuild.kb1" not in before else "created",
                 "ok" if "_rebuild.kb1" not in before else "VIOLATION"])
    return rows


def break_things(store: str, runs: str) -> None:
    """Copies of 'pharma' with a damaged manifest or journal, one built by an older analyzer, a garbage run."""
    original = Path(store) / "pharma"
    for name in (*BROKEN_KBS, STALE_KB):
        shutil.copytree(original, Path(store) / name, ignore=shutil.ignore_patterns(".lock"))
        path = Path(store) / name / "manifest.json"
        manifest = json.loads(path.read_text(encoding="utf-8"))
        manifest["kb"] = name
        if name == "bad-variant":
            manifest["embedder"]["spec"]["variant"] = "no-such-variant"
        elif name == "no-embedder":
            del manifest["embedder"]
        elif name == "string-components":
            manifest["components"] = "garbled"
        elif name == STALE_KB:
            manifest["components"]["analyzer.jieba"] = STALE_VERSION
        path.write_text(json.dumps(manifest), encoding="utf-8")
    (Path(store) / "garbled-journal" / "ingest.journal.json").write_text("{garbled", encoding="utf-8")
    (Path(runs) / GARBAGE_RUN).mkdir(parents=True, exist_ok=True)
    (Path(runs) / GARBAGE_RUN / "metrics.json").write_text("\x00not json{", encoding="utf-8")
