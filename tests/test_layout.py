"""The house rules of the code itself (issue 31): no module over 600 lines, and the core
loads without the user interface or the benchmarks (lint-imports checks the imports
statically; this checks what a real import loads)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_no_module_is_over_600_lines() -> None:
    modules = [*(ROOT / "assistant").rglob("*.py"), *(ROOT / "bench").rglob("*.py")]
    assert len(modules) > 40
    long = {
        str(p.relative_to(ROOT)): n
        for p in modules
        if (n := len(p.read_text("utf-8").splitlines())) > 600
    }
    assert long == {}


def test_the_core_loads_without_the_ui_or_the_benchmarks() -> None:
    check = (
        "import sys\n"
        "import assistant.core.pipeline, assistant.core.session, assistant.privacy.detector\n"
        # (click itself is loaded by sqlite-utils, a dependency; lint-imports shows that
        # no module of the core imports it)
        "loaded = [m for m in ('textual', 'assistant.cli', 'assistant.tui', 'drag_bench') "
        "if m in sys.modules]\n"
        "print(loaded)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "[]", done.stdout


def test_the_app_and_the_cli_load_without_the_benchmarks_installed() -> None:
    """The benchmarks are not in the app's wheel: `drag` must start without them."""
    check = (
        "import sys\n"
        "sys.modules['drag_bench'] = None  # not installed\n"
        "import assistant.tui.app, assistant.cli\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.stdout.strip() == "ok", done.stderr[-2000:]
