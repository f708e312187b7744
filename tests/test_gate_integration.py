"""The confidence gate end to end: the real tiny student (llama.cpp) reads its reply with
and without the real teacher's evidence, through ``drag ask``.  No fakes here."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from assistant.cli import cli
from assistant.drag import gate

pytestmark = pytest.mark.integration

QUESTION = "What is the capital of France?"


def ask(env: dict[str, str], *args: str) -> Any:
    result = CliRunner().invoke(cli, ["ask", *args, QUESTION], env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def test_drag_ask_json_says_which_way_the_gate_went_and_the_answer_went_that_way(
    teacher_env: dict[str, str],
) -> None:
    env = {**teacher_env, "DRAG_TEACHER_MAX_TOKENS": "1024", "DRAG_PIPELINE_MODE": "evidence"}
    # The teacher once (the evidence is cached); then the same context three ways.
    always = json.loads(ask(env, "--json", "--k", "3", "--gate", "always-evidence").stdout)
    assert always["source"] == "teacher" and always["used"]["evidence"] >= 1
    never = json.loads(ask(env, "--json", "--k", "3", "--gate", "never").stdout)
    auto = json.loads(ask(env, "--json", "--k", "3").stdout)  # the default
    assert never["source"] == auto["source"] == "cache"
    assert [e["text"] for e in never["evidence"]] == [e["text"] for e in always["evidence"]]

    assert always["gate"]["setting"] == "always-evidence" and always["gate"]["went"] == "evidence"
    assert never["gate"]["setting"] == "never" and never["gate"]["went"] == "alone"
    # Which prompt the student answered shows in its size: the evidence's tokens or not.
    alone_tokens, context_tokens = (
        never["student"]["prompt_tokens"],
        always["student"]["prompt_tokens"],
    )
    assert alone_tokens < context_tokens

    g = auto["gate"]
    assert g["setting"] == "auto" and "gate" in auto["timings"]
    assert g["confidence_alone"] <= 0 and g["confidence_with_context"] <= 0
    # The openings it read are not kept: they were written from the question's real values.
    assert g["reply_alone"] == g["reply_with_context"] == ""
    assert auto["context_used"] == (g["went"] == "evidence")
    expected = gate.decide(g["confidence_alone"], g["confidence_with_context"], g["margin"])
    # The record's confidences are rounded to 4 places: a reading within that of the
    # margin could round across it.
    gap = g["confidence_with_context"] - g["confidence_alone"] - g["margin"]
    assert g["went"] == expected or abs(gap) < 1e-3
    answered = auto["student"]["prompt_tokens"]
    assert answered == (context_tokens if expected == "evidence" else alone_tokens)


def test_drag_ask_says_in_plain_words_when_the_context_was_not_used(
    teacher_env: dict[str, str],
) -> None:
    env = {**teacher_env, "DRAG_TEACHER_MAX_TOKENS": "1024", "DRAG_PIPELINE_MODE": "evidence"}
    out = ask(env, "--k", "2", "--gate", "never").stdout
    assert "Evidence offered, not used (top " in out
    assert "Gate: context not used (pipeline.gate = never)" in out


def test_with_the_embedded_teacher_auto_answers_alone_and_keeps_the_evidence(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The default with the embedded local teacher (issue 49): the real tiny student
    answers the prompt without the context, the gate not read; the evidence stays in
    the result to be shown.  No teacher is started: the context is given."""
    from assistant.base import config
    from assistant.core import pipeline
    from assistant.core.results import AskResult, ScoredEvidence
    from assistant.core.session import Session
    from tests.conftest import TEST_MODEL

    monkeypatch.setenv("DRAG_STUDENT_MODEL", TEST_MODEL)
    monkeypatch.setenv("DRAG_TEACHER_ENDPOINT", "local")
    monkeypatch.setenv("DRAG_STUDENT_MAX_TOKENS", "4")  # fewer than the gate reads (8)
    statement = "Paris is the capital and the largest city of France."
    given = [ScoredEvidence(1, statement, 1, 0.5, 0.1, statement)]
    said: list[str] = []
    with Session(config.load(), status=said.append) as rt:
        assert rt.teacher_is_local
        answered, weighed = {}, {}
        for setting in ("auto", "gate", "always-evidence"):
            result = AskResult(question=QUESTION, mode="evidence", n=3, k=1, evidence=given)
            chosen = None if setting == "auto" else setting  # auto: the setting's default
            said.clear()
            answered[setting] = pipeline.respond(rt, result, gate_setting=chosen)  # type: ignore[arg-type]
            weighed[setting] = "the student weighs the context…" in said
    # The app's status line says the student weighs the context only where it does.
    assert weighed == {"auto": False, "gate": True, "always-evidence": False}
    # No answer is longer than student.max_tokens, the gate's 8-token reading included.
    assert all(a.student["completion_tokens"] <= 4 for a in answered.values())
    auto, forced, always = answered["auto"], answered["gate"], answered["always-evidence"]
    assert (auto.gate["setting"], auto.gate["ran"], auto.gate["went"]) == ("auto", "never", "alone")
    assert "embedded teacher" in auto.gate["why"] and not auto.context_used
    assert auto.gate["confidence_alone"] is None  # the student was not read both ways
    assert [e.text for e in auto.evidence] == [statement]  # still there to be shown
    # The prompt it answered is the one without the statement: fewer tokens.
    assert auto.student["prompt_tokens"] < always.student["prompt_tokens"]
    assert forced.gate["ran"] == "gate" and forced.gate["confidence_alone"] is not None
