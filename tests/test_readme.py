"""The README's "From Python, chat UIs and frameworks" section runs as written: its Python blocks in
order in a fresh process and home, the OpenAI client block against a real `babelrag serve`."""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from conftest import ROOT, framework, need_llm

SECTION = "## From Python, chat UIs and frameworks"


def python_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def run(code: str, env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, f"README block failed:\n{code}\n--- stderr ---\n{done.stderr[-3000:]}"
    return done.stdout


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
def test_the_readme_examples_run_as_written(tmp_path: Path) -> None:
    need_llm()
    for module in ("haystack", "llama_index.core", "openai"):
        framework(module)
    blocks = python_blocks()
    assert len(blocks) == 4, "the section's Python blocks changed: update this test's expectations"
    api, haystack, llama_index, chat = blocks
    env = {**os.environ, "BABELRAG_HOME": str(tmp_path / "home"), "BABELRAG_PROGRESS": "0"}
    env.pop("BABELRAG_STORE", None)

    printed = run(api, env, tmp_path)
    assert "'SE', 'PL'" in printed or "['PL', 'SE']" in printed
    assert re.search(r"\d\.\d\d  sv  Apoteket säljer receptfria", printed)
    assert "Polsce" not in printed.split("\n", 3)[1], "a PL passage in the SE search"
    printed = run(haystack, env, tmp_path)
    assert printed.startswith("[sv] Apoteket säljer receptfria läkemedel")
    printed = run(llama_index, env, tmp_path)
    assert re.match(r"\d\.\d\d  pl  Apteka sprzedaje leki bez recepty", printed)

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "babelrag", "serve", "--port", str(port)], env=env,
                              cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(300):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        printed = run(chat.replace("127.0.0.1:8000", f"127.0.0.1:{port}"), env, tmp_path)
    finally:
        server.terminate()
        server.wait(30)
    assert "'pharmacy', 'pharmacy:chat'" in printed
    cited = re.findall(r"\((\d), '([\w-]+)', '(\w+)'\)", printed.rsplit("\n [", 1)[-1])
    assert cited and {doc for _, doc, _ in cited} <= {"se-1", "se-2", "eu-1"}, printed  # SE and global only
