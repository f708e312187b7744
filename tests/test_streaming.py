"""The student starts at once: its answer streams, and a prompt prefix it has just read
is not read again (real llama.cpp, the tiny SmolLM2 test model)."""

from __future__ import annotations

import json
import os
import pty
import select
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from assistant.drag import answer
from assistant.models.student import Student

pytestmark = pytest.mark.integration

EVIDENCE = [
    "Paris is the capital and largest city of France.",
    "The Seine flows through Paris.",
    "France is a country in Western Europe.",
    "Lyon is the third-largest city of France.",
]


def messages(question: str, k: int) -> list[dict[str, str]]:
    """The DRAG prompt, question first: a K sweep shares the question and first statements."""
    return answer.build_messages(question, EVIDENCE[:k], [], "evidence")


def test_a_reused_prefix_gives_the_answer_a_fresh_read_gives(test_model_path: Path) -> None:
    """K = 3 after K = 2 reads only the new statement, and answers as a student that read
    the whole K = 3 prompt from its first token (temperature 0)."""
    student = Student(test_model_path, n_ctx=1024)
    evaluated = _count_evals(student)
    try:
        question = "What is the capital of France?"
        student.chat(messages(question, 2), max_tokens=24)  # the prefix, now in the KV cache
        evaluated.clear()
        reused = student.chat(messages(question, 3), max_tokens=24)
        reused_read = evaluated[0]
        student.forget()
        evaluated.clear()
        fresh = student.chat(messages(question, 3), max_tokens=24)
        fresh_read = evaluated[0]
    finally:
        student.close()
    assert reused.text == fresh.text and reused.text
    # The reuse is real: far fewer prompt tokens were evaluated the second time (counted,
    # not timed: the suite shares the cores).
    assert reused_read < fresh_read / 2, (reused_read, fresh_read)


def _count_evals(student: Student) -> list[int]:
    """How many tokens each llama.cpp eval call of ``student`` reads, in order."""
    evaluated: list[int] = []
    real_eval = student._llm.eval

    def counting_eval(tokens: Any) -> None:
        evaluated.append(len(tokens))
        real_eval(tokens)

    student._llm.eval = counting_eval  # type: ignore[method-assign]
    return evaluated


def test_a_primed_student_reads_only_the_question_and_answers_the_same(
    test_model_path: Path,
) -> None:
    """Student.prime reads the system prompt ahead: the first question then evaluates
    only what follows it, and gets the answer of a student that read it all."""
    student = Student(test_model_path, n_ctx=1024)
    evaluated = _count_evals(student)
    try:
        question = messages("What is the capital of France?", 3)
        fresh = student.chat(question, max_tokens=24)
        whole = evaluated[0]
        student.forget()
        student.prime(answer.SYSTEM)
        evaluated.clear()
        primed = student.chat(question, max_tokens=24)
        system_tokens = student.count_tokens(answer.SYSTEM)
    finally:
        student.close()
    assert primed.text == fresh.text and primed.text
    assert evaluated[0] <= whole - system_tokens  # the system prompt was not read again


def test_an_answers_token_logprobs_are_the_models_and_change_nothing(
    test_model_path: Path,
) -> None:
    """chat(logprobs=True) writes the reply it writes without them, and gives each of its
    tokens the log-probability the model gave it (as the gate's probe, which reads them
    its own way, finds for the same greedy reply)."""
    student = Student(test_model_path, n_ctx=1024)
    try:
        question = messages("What is the capital of France?", 3)
        plain = student.chat(question, max_tokens=48)
        student.forget()
        watched = student.chat(question, max_tokens=48, logprobs=True)
        student.forget()
        probe = student.probe(question, max_tokens=48)
    finally:
        student.close()
    assert watched.text == plain.text == probe.text and plain.text
    assert plain.token_logprobs == ()
    assert probe.ended  # the whole reply: each of its tokens has its log-probability
    assert len(watched.token_logprobs) == len(probe.token_logprobs)
    assert watched.token_logprobs == pytest.approx(probe.token_logprobs, abs=1e-3)
    assert min(probe.token_logprobs) < -0.01  # not a reply the model was sure of throughout


def test_the_answer_streams_before_it_is_complete(test_model_path: Path) -> None:
    """Each piece is handed on as its token is made: when the first piece arrives, the
    tokens after it have not been evaluated yet (counted at llama.cpp's eval calls)."""
    student = Student(test_model_path, n_ctx=1024)
    evaluated = _count_evals(student)
    pieces: list[tuple[int, str]] = []
    try:
        gen = student.chat(
            messages("Describe Paris in a few sentences.", 4),
            max_tokens=48,
            on_text=lambda piece: pieces.append((len(evaluated), piece)),
        )
        evals = len(evaluated)
    finally:
        student.close()
    assert len(pieces) == gen.completion_tokens >= 8
    assert "".join(p for _, p in pieces).strip() == gen.text
    # A chat that wrote the whole answer first and handed it on after would show every
    # piece at the last eval; here the first comes while most of the answer is unwritten.
    assert pieces[0][0] < pieces[-1][0] and pieces[0][0] <= evals - 6, (pieces[:2], evals)


def test_drag_ask_on_a_terminal_prints_the_answer_as_it_is_written(
    on_teacher: dict[str, str],
    tmp_path: Path,
) -> None:
    """The real CLI on a pseudo-terminal: the answer's words arrive in several writes, and
    the first before the footer the CLI prints once the answer is complete.  The graph is
    built after the answer (as with the embedded teacher), and its status line starts on
    a line of its own."""
    env = {
        **os.environ,
        "DRAG_STUDENT_MAX_TOKENS": "48",
        "DRAG_PIPELINE_MODE": "combined",
        "DRAG_PIPELINE_GRAPH_TIMING": "after-answer",
        "DRAG_PIPELINE_N": "4",
        "DRAG_PRIVACY_REVIEW": "never",
    }
    pid, fd = pty.fork()
    if pid == 0:  # the child: the drag command, its output on the terminal
        argv = [sys.executable, "-m", "assistant", "ask", "Describe Paris in a few sentences."]
        os.execve(sys.executable, argv, env)
    writes: list[tuple[float, bytes]] = []
    started = time.perf_counter()
    while time.perf_counter() - started < 300:
        ready, _, _ = select.select([fd], [], [], 5)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        writes.append((time.perf_counter() - started, chunk))
    _, status = os.waitpid(pid, 0)
    output = b"".join(c for _, c in writes).decode("utf-8", "replace")
    assert os.WEXITSTATUS(status) == 0, output[-2000:]
    footer = next(i for i, (_, c) in enumerate(writes) if b"student:" in c)
    status_line = b"\x1b[2m"  # the dim progress lines on stderr, the same terminal
    answer_writes = [i for i, (_, c) in enumerate(writes[:footer]) if status_line not in c]
    assert len(answer_writes) >= 2, json.dumps([c.decode("utf-8", "replace") for _, c in writes])
    assert writes[answer_writes[0]][0] < writes[footer][0]
    later = output.index("building the knowledge graph for the cache")
    before_status = output[: output.rindex("\x1b[2m", 0, later)]
    assert before_status.endswith("\n"), repr(before_status[-200:])
