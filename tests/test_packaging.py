"""The wheel builds and carries what the package reads at run time."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_builds_with_the_manifest_and_no_benchmark(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (wheel,) = tmp_path.glob("drag_assistant-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "assistant/_data/manifest.toml" in names
    # The benchmarks, their code and their data, are a package of their own (bench/).
    assert not any(n.startswith(("drag_bench/", "assistant/bench/", "bench/")) for n in names)
    assert not any(n.endswith(".jsonl") for n in names)
    assert not any(n.endswith(".gguf") for n in names)  # weights never ship in this wheel


@pytest.mark.timeout(3000)  # builds llama-cpp-python's wheel when pip has none cached
def test_the_wheelhouse_installs_into_an_empty_venv_with_no_index(tmp_path: Path) -> None:
    """make wheelhouse's script, then its installer with no index reachable (the model
    extra is left out to save time): the app's parts import, the embedder answers, and
    torch is not among them."""
    house, venv = tmp_path / "house", tmp_path / "venv"
    env = {**os.environ, "PYTHON": sys.executable}
    built = subprocess.run(
        ["sh", str(ROOT / "packaging" / "wheelhouse.sh"), str(house), "cpu"],
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    assert (house / "install.sh").is_file() and list(house.glob("drag_assistant-*.whl"))
    # No index at all: pip's configuration is ignored and the index URL leads nowhere.
    offline = {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": "http://127.0.0.1:9/"}
    installed = subprocess.run(
        ["sh", str(house / "install.sh"), str(venv)],
        env=offline,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    check = (
        "import importlib.util, sys\n"
        "from assistant.models.embedder import load\n"
        "from assistant.privacy.detector import Detector\n"
        "import llama_cpp, textual, presidio_analyzer\n"
        "from assistant.models import llamabuild\n"
        "print(load().embed(['offline']).shape, importlib.util.find_spec('torch'),\n"
        "      len(llamabuild.cpu_variants()))\n"
    )
    ran = subprocess.run(
        [str(venv / "bin" / "python"), "-c", check],
        env={**offline, "DRAG_HOME": str(tmp_path / "home")},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    # The portable llama.cpp travelled: its CPU code for every level (14 on x86-64).
    assert ran.stdout.strip() == "(1, 384) None 14"
