"""The llama.cpp build: portable flags, the check in a child process, and what a build
that dies on this CPU gives (issue 28).

The crashes here are real where they can be: a CPU variant that needs an instruction
this CPU lacks dies with SIGILL in a real llama.cpp child.  A child that kills itself
with SIGSEGV stands in for the AMX fault of the issue (``SEGFAULTING_PROBE``, a fake).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from assistant.base.errors import ModelError
from assistant.models import llamabuild, llamacheck

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "Why is the sky blue?"

# A fake probe: a child that dies as llama.cpp did on the AMX machine of issue 28.
SEGFAULTING_PROBE = [
    sys.executable,
    "-c",
    "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)",
]


@pytest.fixture
def fresh_verdicts(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A cache folder of its own: no verdict of another test answers for this one.  A
    short path, as a user's is: error lines hold it whole."""
    home = Path(tempfile.mkdtemp(prefix="drag-"))
    monkeypatch.setenv("DRAG_HOME", str(home))
    yield home / "cache" / llamacheck.VERDICTS
    shutil.rmtree(home, ignore_errors=True)


def _portable_flags() -> list[str]:
    text = (ROOT / "packaging" / "build-llama.sh").read_text()
    match = re.search(r'^portable="([^"]*)"', text, re.M)
    assert match, "build-llama.sh names its portable flags in one line"
    return shlex.split(match.group(1))


def test_the_build_flags_are_portable() -> None:
    flags = _portable_flags()
    assert "-DGGML_NATIVE=OFF" in flags
    assert "-DGGML_BACKEND_DL=ON" in flags and "-DGGML_CPU_ALL_VARIANTS=ON" in flags
    # The variants are installed beside libllama.so, where the loader looks for them.
    assert "-DCMAKE_INSTALL_BINDIR=llama_cpp/lib" in flags
    makefile = (ROOT / "Makefile").read_text()
    wheelhouse = (ROOT / "packaging" / "wheelhouse.sh").read_text()
    build = (ROOT / "packaging" / "build-llama.sh").read_text()
    for text in (makefile, wheelhouse, build):
        code = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))
        assert not re.search(r"GGML_NATIVE=ON|-march=native", code)
    # No default extra flag, and both the venv and the wheelhouse take that one build.
    assert re.search(r"^export CMAKE_ARGS \?=\s*$", makefile, re.M)
    assert "packaging/build-llama.sh" in makefile and "build-llama.sh" in wheelhouse
    # The wheel never comes from pip's cache, which would hand back an older native build.
    assert "--no-cache-dir" in build and "--no-binary llama-cpp-python" in build


def test_a_native_flag_from_the_shell_does_not_undo_the_portable_build(tmp_path: Path) -> None:
    """A CMAKE_ARGS left in a user's shell (``-DGGML_NATIVE=ON`` from an earlier
    llama-cpp-python install) is passed on, before the portable flags, which CMake takes
    last; a -march=native in CFLAGS is not passed: the build stays portable.
    fake_python records what pip would be given."""
    seen = tmp_path / "cmake-args"
    fake_python = tmp_path / "fake_python"
    script = f'printf "%s" "$CMAKE_ARGS" > {seen}; printf "%s|%s" "$CFLAGS" "$CXXFLAGS" > {seen}.c'
    fake_python.write_text(f"#!/bin/sh\n{script}\nexit 1\n")
    fake_python.chmod(0o755)
    env = {
        **os.environ,
        "PYTHON": str(fake_python),
        "DRAG_WHEELS": str(tmp_path / "wheels"),
        "CMAKE_ARGS": "-DGGML_NATIVE=ON -DGGML_CPU_ALL_VARIANTS=OFF -DGGML_CUDA=on",
        "CFLAGS": "-O2 -march=native -I/opt/cuda/include",
        "CXXFLAGS": "-mavx2 -g",
    }
    built = subprocess.run(
        ["sh", str(ROOT / "packaging" / "build-llama.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert built.returncode != 0  # the fake pip builds nothing
    flags = shlex.split(seen.read_text())
    last = {f.split("=")[0]: f for f in flags}  # CMake keeps the last -D of each name
    assert last["-DGGML_NATIVE"] == "-DGGML_NATIVE=OFF"
    assert last["-DGGML_CPU_ALL_VARIANTS"] == "-DGGML_CPU_ALL_VARIANTS=ON"
    assert last["-DGGML_CUDA"] == "-DGGML_CUDA=on"  # what the user adds still counts
    # A machine option in CFLAGS or CXXFLAGS (CMake adds them to every file) is left out.
    assert (tmp_path / "cmake-args.c").read_text() == "-O2 -I/opt/cuda/include|-g"


def test_the_installed_build_carries_a_variant_for_each_cpu_level() -> None:
    names = {llamabuild.variant_name(p) for p in llamabuild.cpu_variants()}
    assert {"x64", "sse42", "haswell", "skylakex", "zen4", "sapphirerapids"} <= names
    ranked = llamabuild.ranked()
    assert ranked, "no variant runs on this CPU"
    assert llamabuild.variant_name(ranked[-1]) in {"x64", "sse42"}  # the floor runs anywhere


@pytest.mark.integration
def test_a_real_probe_passes_and_its_verdict_is_kept(
    test_model_path: Path, fresh_verdicts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = llamacheck.ready(test_model_path)
    # The best variant for this CPU, unless better ones died here (as AMX did in issue 28).
    assert first.checked and first.variant == llamabuild.ranked()[len(first.skipped)]
    assert fresh_verdicts.is_file()
    # Known now: no child runs again (one that would is a failure).
    monkeypatch.setattr(llamacheck, "probe_command", lambda *_a: SEGFAULTING_PROBE)
    again = llamacheck.ready(test_model_path)
    assert not again.checked and again.variant == first.variant


def _variant_this_cpu_lacks() -> Path:
    """A variant that uses an instruction this CPU does not have.  Not sapphirerapids: its
    AMX code runs only after Linux grants the tile state, so it may run where it scores 0."""
    lacking = [
        p
        for p in llamabuild.cpu_variants()
        if llamabuild.score(p) == 0 and llamabuild.variant_name(p) != "sapphirerapids"
    ]
    if not lacking:
        pytest.skip("this CPU runs every variant of the build but AMX's")
    return lacking[0]


@pytest.mark.integration
def test_a_variant_that_dies_here_is_skipped_for_the_next_best(
    test_model_path: Path, fresh_verdicts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CPU that reports an instruction the system does not let it use (the AMX VM of
    issue 28): the best variant by its score dies, for real, and the next one is used."""
    dies = _variant_this_cpu_lacks()
    runs = llamacheck.ready(test_model_path).variant  # checked in this test's own cache
    assert runs is not None
    monkeypatch.setattr(llamabuild, "ranked", lambda folder=None: [dies, runs])
    fresh_verdicts.unlink()  # checked again, with the ranking of a CPU that misreports
    verdict = llamacheck.ready(test_model_path)
    assert verdict.variant == runs
    assert len(verdict.skipped) == 1 and verdict.skipped[0].startswith(
        f"{llamabuild.variant_name(dies)} (killed by SIGILL"
    )


def test_a_probe_that_dies_names_the_signal_and_the_fix(
    test_model_path: Path, fresh_verdicts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(llamabuild, "ranked", lambda folder=None: [])  # a build for one CPU
    monkeypatch.setattr(llamacheck, "probe_command", lambda *_a: SEGFAULTING_PROBE)
    with pytest.raises(ModelError) as caught:
        llamacheck.ready(test_model_path)
    message = str(caught.value)
    assert "\n" not in message and "killed by SIGSEGV" in message
    assert "make llama" in message and re.search(r"\(log: \S+/llama-probe-\w+\.log\)$", message)
    # Kept for this build: the next run says so at once, with no child that dies again.
    monkeypatch.setattr(llamacheck, "probe_command", lambda *_a: ["false"])
    with pytest.raises(ModelError) as again:
        llamacheck.ready(test_model_path)
    assert str(again.value) == message


def test_a_portable_build_whose_every_variant_dies_says_how_in_one_line(
    test_model_path: Path, fresh_verdicts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    variants = llamabuild.ranked()[:2]
    monkeypatch.setattr(llamabuild, "ranked", lambda folder=None: variants)
    monkeypatch.setattr(llamacheck, "probe_command", lambda *_a: SEGFAULTING_PROBE)
    with pytest.raises(ModelError) as caught:
        llamacheck.ready(test_model_path)
    message = str(caught.value)
    assert "each of the 2 CPU variants" in message and "(killed by SIGSEGV" in message
    assert "so the model is not loaded" in message and "make llama" in message
    assert re.search(r"\(log: \S+\.log\)$", message)  # whole, at the end
    # Which variant died how is in the verdict file, for drag doctor and a bug report.
    (kept,) = json.loads(fresh_verdicts.read_text()).values()
    assert [v.split(" (")[0] for v in kept["skipped"]] == [
        llamabuild.variant_name(v) for v in variants
    ]


def test_a_child_stopped_by_ctrl_c_is_no_verdict_on_the_build(
    test_model_path: Path, fresh_verdicts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGINT (or the out-of-memory killer's SIGKILL) says nothing of the build: an error
    this time, nothing kept, and the next start checks again."""
    interrupted = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]
    monkeypatch.setattr(llamacheck, "probe_command", lambda *_a: interrupted)
    with pytest.raises(ModelError, match=r"ended \(killed by SIGKILL"):
        llamacheck.ready(test_model_path)
    assert not fresh_verdicts.exists()


class FakeLlama:
    """Stands in for llama_cpp.Llama to see whether the student was loaded at all."""

    made: ClassVar[list[str]] = []

    def __init__(self, **kwargs: object) -> None:
        FakeLlama.made.append(str(kwargs.get("model_path")))


def test_the_student_is_not_loaded_in_process_when_the_probe_dies(
    test_model_path: Path, fresh_verdicts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import llama_cpp

    from assistant.models.student import Student

    monkeypatch.setattr(llamabuild, "ranked", lambda folder=None: [])
    monkeypatch.setattr(llamacheck, "probe_command", lambda *_a: SEGFAULTING_PROBE)
    monkeypatch.setattr(llama_cpp, "Llama", FakeLlama)
    FakeLlama.made.clear()
    with pytest.raises(ModelError, match="SIGSEGV"):
        Student(test_model_path, gpu="off")
    assert FakeLlama.made == []


def test_ask_with_a_build_that_dies_is_one_line_and_keeps_the_question(
    test_model_path: Path,
    fresh_verdicts: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from assistant import cli
    from assistant.core import drafts

    monkeypatch.setenv("DRAG_STUDENT_MODEL", str(test_model_path))
    monkeypatch.setattr(llamabuild, "ranked", lambda folder=None: [])
    monkeypatch.setattr(llamacheck, "probe_command", lambda *_a: SEGFAULTING_PROBE)
    with pytest.raises(SystemExit) as exited:
        cli.main(["ask", "--mode", "none", QUESTION])
    assert exited.value.code == ModelError.exit_code
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("drag: error: llama.cpp was killed"), lines
    assert "killed by SIGSEGV" in lines[0] and "make llama" in lines[0]
    name = re.search(r"kept in drag drafts as (\S+?)\)$", lines[0])
    assert name and drafts.read(name.group(1))["question"] == QUESTION


def test_describe_exit() -> None:
    assert llamacheck.describe_exit(-int(signal.SIGSEGV)).startswith("killed by SIGSEGV (")
    assert llamacheck.describe_exit(-int(signal.SIGILL)).startswith("killed by SIGILL (")
    assert llamacheck.describe_exit(3) == "exited with code 3"


def test_the_teacher_server_runs_under_the_chosen_variant(tmp_path: Path) -> None:
    """The server's command loads the variant, and ps still shows llama_cpp.server."""
    from assistant.models.localserver import LocalServer

    variant = llamabuild.ranked()[0]
    command = LocalServer(tmp_path / "m.gguf", port=1).command(variant)
    assert command[command.index("--cpu") + 1] == str(variant)
    assert command[command.index("llama_cpp.server") + 1 :][:2] == [
        "--model",
        str(tmp_path / "m.gguf"),
    ]


@pytest.mark.integration
def test_a_probe_child_computes_tokens_with_the_real_build(test_model_path: Path) -> None:
    variant = llamacheck.ready(test_model_path).variant
    proc = subprocess.run(
        llamacheck.probe_command(test_model_path, 0, variant),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["ok"] and report["usage"]["completion_tokens"] >= 1
    assert report["usage"]["prompt_tokens"] >= 40


@pytest.mark.integration
def test_a_process_that_runs_one_variant_checks_the_next_model_with_it(
    test_model_path: Path, fresh_verdicts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One process runs one CPU variant: a model whose own check chose another (AMX serves
    some quantisations only) is checked with the one loaded, not refused."""
    first = llamacheck.ready(test_model_path)
    # Another variant that runs here: not one whose check died (sapphirerapids on a VM
    # that reports AMX without granting it: its score says it fits).
    died = {s.split(" ", 1)[0] for s in first.skipped}
    other = next(
        v
        for v in llamabuild.ranked()
        if v != first.variant and llamabuild.variant_name(v) not in died
    )
    monkeypatch.setitem(llamabuild._loaded, "other", None)
    monkeypatch.setitem(llamabuild._loaded, "cpu", other)  # as if an earlier model chose it
    verdict = llamacheck.prepare(test_model_path)
    assert verdict.variant == other and verdict.checked
