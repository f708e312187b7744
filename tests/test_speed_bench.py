"""`drag bench speed` with the real llama.cpp student (the tiny test model twice: by its
manifest name and by path, so the side-by-side ratio is checked on a real run)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from drag_bench import speed

pytestmark = pytest.mark.integration


def test_two_models_side_by_side(
    test_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "speed.json"
    names = f"smollm2-135m-instruct,{test_model_path}"
    args = ["--students", names, "--runs", "2", "--decode-tokens", "8", "--json", str(out)]
    assert speed.main(args) == 0
    rows = json.loads(out.read_text("utf-8"))
    assert [r["model"] for r in rows] == names.split(",")
    for row in rows:
        assert row["prompt_tokens"] > 300  # the DRAG prompt shape, not a toy prompt
        assert row["first_token_s"] > 0 and row["prefill_tok_s"] > 0 and row["decode_tok_s"] > 0
    printed = capsys.readouterr().out
    assert "| smollm2-135m-instruct | 98 |" in printed
    assert printed.count("| 1.00 |") >= 1  # the first model against itself


def test_bad_arguments_are_one_line_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert speed.main(["--students", "", "--runs", "1"]) == 2
    assert speed.main(["--students", "no-such-model"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("bench: error: ") for line in err)


def test_whole_questions_with_the_graph_before_and_after_the_answer(
    teacher_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--ask on the real test teacher and student: both graph timings, then offline from
    the cache they filled, each moment in order, and the student's raw speed."""
    for key, value in teacher_env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("DRAG_STUDENT_MAX_TOKENS", "8")
    monkeypatch.setenv("DRAG_PIPELINE_N", "4")
    monkeypatch.setenv("DRAG_TEACHER_MAX_TOKENS", "256")
    from assistant.core import pipeline

    sources: list[tuple[bool, str]] = []
    real_ask = pipeline.ask

    def ask(rt: Any, *args: Any, **kwargs: Any) -> Any:
        result = real_ask(rt, *args, **kwargs)
        sources.append((rt.offline, result.source))
        return result

    monkeypatch.setattr(pipeline, "ask", ask)
    out = tmp_path / "ask.json"
    assert speed.main(["--ask", "1", "--json", str(out)]) == 0
    timings = json.loads(out.read_text("utf-8"))
    assert list(timings) == ["before-answer", "after-answer", "offline", "student"]
    for path in ("before-answer", "after-answer", "offline"):
        t = timings[path]
        assert 0 < t["first_token"] <= t["answered"] <= t["done"]
        assert t["prompt_tokens"] > 0
    # Online questions went to the teacher; offline, the same question came from the cache
    # (how much sooner it starts is the benchmark's printed figure, not a test's bound).
    assert sources == [(False, "teacher")] * 4 + [(True, "cache")], sources  # 2 are warm-ups
    assert timings["student"]["prefill_tok_s"] > 0 and timings["student"]["decode_tok_s"] > 0
    printed = capsys.readouterr().out
    assert "| online, graph after the answer |" in printed
    assert "| offline, the same questions from the cache |" in printed
    assert "sooner with the graph after it" in printed and "raw prefill speed" in printed


def test_two_builds_side_by_side_alternate_in_one_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`drag bench builds`: each environment in its own process, alternating by round.
    Here both names run this environment's build (one through a wrapper script)."""
    import sys

    from drag_bench import builds

    from assistant.models import llamacheck, modelfiles

    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    out = tmp_path / "builds.json"
    args = ["--python", sys.executable, "--python", str(wrapper), "--runs", "2"]
    args += ["--student", "smollm2-135m-instruct", "--decode-tokens", "8", "--json", str(out)]
    assert builds.main(args) == 0
    rows = json.loads(out.read_text("utf-8"))
    assert list(rows) == [sys.executable, str(wrapper)]
    best = llamacheck.ready(modelfiles.resolve("smollm2-135m-instruct")[0]).name
    for runs in rows.values():
        assert len(runs) == 2 and all(r["cpu"] == best and r["prefill_tok_s"] > 0 for r in runs)
    printed = capsys.readouterr()
    assert "| 1.000 | 1.000 |" in printed.out  # the first build against itself
    order = [ln.split(":")[0] for ln in printed.err.splitlines() if ln.startswith("round")]
    assert order == [
        f"round 1 {sys.executable}",
        f"round 1 {wrapper}",
        f"round 2 {wrapper}",
        f"round 2 {sys.executable}",
    ]


def test_builds_needs_two_environments(capsys: pytest.CaptureFixture[str]) -> None:
    from drag_bench import builds

    assert builds.main(["--python", "python3"]) == 2
    assert capsys.readouterr().err.startswith("bench: error: ")


def test_reader_start_loads_the_prompts_head_in_a_new_process(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`drag bench reader-start`: each way in a process of its own; the state file made
    by the first process is loaded by the next ones (the real llama.cpp binding)."""
    from drag_bench import readerstart

    assert readerstart.main(["--runs", "1", "--model", "smollm2-135m-instruct"]) == 0
    printed = capsys.readouterr().out
    assert "| disk | loaded |" in printed
    assert "| read | read |" in printed and "| none | none |" in printed
