"""The wheel builds and carries what the package reads at run time."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_builds_with_manifest_and_data(tmp_path: Path) -> None:
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
    assert "assistant/bench/data/arc_challenge_first200.jsonl" in names
    assert "assistant/bench/data/PROVENANCE.md" in names
    assert not any(n.endswith(".gguf") for n in names)  # weights never ship in this wheel
