"""A local teacher whose llama.cpp server dies mid-request: the user is told that it
crashed, how (the signal) and where its log is, the question is kept, and the next
question starts a new server (issue 28).  The server, the keeper and the crash are real:
the test kills the server with SIGSEGV once the request has been sent to it."""

from __future__ import annotations

import os
import re
import signal
import socket
import sys
import threading
from pathlib import Path

import pytest

from assistant.models import localserver
from tests.conftest import TEST_MODEL

QUESTION = "Why do leaves change colour in autumn?"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a shared server"),
]


class RequestSent:
    """Set once the head of a chat request has gone into a socket of this process."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.event = threading.Event()
        real_send, real_sendall = socket.socket.send, socket.socket.sendall

        def send(sock: socket.socket, data: bytes, *args: object) -> int:
            n = real_send(sock, data, *args)  # type: ignore[arg-type]
            self._saw(data)
            return n

        def sendall(sock: socket.socket, data: bytes, *args: object) -> None:
            real_sendall(sock, data, *args)  # type: ignore[arg-type]
            self._saw(data)

        monkeypatch.setattr(socket.socket, "send", send)
        monkeypatch.setattr(socket.socket, "sendall", sendall)

    def _saw(self, data: bytes) -> None:
        if b"POST /v1/chat/completions" in bytes(data):
            self.event.set()


def _kill_the_server_once(sent: RequestSent, killed: list[int]) -> threading.Thread:
    def kill() -> None:
        if not sent.event.wait(timeout=240):
            return  # the test fails below: nothing was killed
        pid = next(iter(localserver._served.values()))[0]
        os.kill(pid, signal.SIGSEGV)
        killed.append(pid)

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def local_teacher(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAG_STUDENT_MODEL", TEST_MODEL)
    monkeypatch.setenv("DRAG_TEACHER_ENDPOINT", "local")
    monkeypatch.setenv("DRAG_TEACHER_MODEL", TEST_MODEL)
    monkeypatch.setenv("DRAG_TEACHER_N_CTX", "2048")
    monkeypatch.setattr(localserver, "_served", {})  # only this test's server


@pytest.mark.usefixtures("local_teacher")
def test_a_teacher_that_crashes_mid_request_is_named_with_its_signal_and_log(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from assistant import cli
    from assistant.core import drafts

    killed: list[int] = []
    killer = _kill_the_server_once(RequestSent(monkeypatch), killed)
    with pytest.raises(SystemExit) as exited:
        cli.main(["ask", "--mode", "evidence", "--n", "8", QUESTION])
    killer.join(timeout=5)
    assert killed, "no chat request reached the server"
    assert exited.value.code == 3
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1, lines
    line = lines[0]
    assert line.startswith("drag: error: the local teacher crashed: ")
    assert "killed by SIGSEGV (segmentation fault)" in line
    assert "cannot reach the teacher" not in line
    log = re.search(r"\(log: (\S+?);", line)
    assert log and Path(log.group(1)).is_file() and log.group(1).endswith(".server.crash.log")
    name = re.search(r"kept in drag drafts as (\S+?)\)$", line)
    assert name and drafts.read(name.group(1))["question"] == QUESTION


@pytest.mark.usefixtures("local_teacher")
def test_the_next_question_after_a_crash_starts_a_new_teacher(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from assistant.base import config
    from assistant.base.errors import TeacherError
    from assistant.core import pipeline
    from assistant.core.session import Session

    killed: list[int] = []
    with Session(config.load({"privacy.review": "never"})) as rt:
        killer = _kill_the_server_once(RequestSent(monkeypatch), killed)
        with pytest.raises(TeacherError, match="killed by SIGSEGV") as caught:
            pipeline.ask(rt, QUESTION, mode="evidence", n=8, k=3)
        killer.join(timeout=5)
        message = str(caught.value)
        assert killed and "the next question starts it again" in message
        log = re.search(r"\(log: (\S+?);", message)
        assert log
        crashed = Path(log.group(1)).read_bytes()
        result = pipeline.ask(rt, "What makes the sea salty?", mode="evidence", n=3, k=2)
        assert result.answer.strip()
        (pid, _exit), *_ = reversed(localserver._served.values())
        assert pid != killed[0]  # a new server answered
        assert Path(log.group(1)).read_bytes() == crashed  # its log did not write over it


def test_a_server_log_that_ends_in_a_traceback_is_told_by_its_exception(tmp_path: Path) -> None:
    """`drag teacher serve --model broken.gguf` ended its one line with pieces of the
    server's traceback (frames, cut mid-word): the exception's own line is told; a log
    without one, its last lines."""
    log = tmp_path / "teacher-server.log"
    log.write_text(
        "llama_model_load: error loading model\n"
        "Traceback (most recent call last):\n"
        '  File "/x/llama_cpp/_internals.py", line 62, in __init__\n'
        '    raise ValueError(f"Failed to load model from file: {path_model}")\n'
        "ValueError: Failed to load model from file: /tmp/broken.gguf\n",
        "utf-8",
    )
    said = "ValueError: Failed to load model from file: /tmp/broken.gguf"
    assert localserver._tail(log) == said
    # Cut for the crash line, its end goes, not the exception's name.
    assert localserver._tail(log, 2, limit=30) == said[:29] + "…"
    log.write_text("one\ntwo\nthree\nfour\n", "utf-8")
    assert localserver._tail(log) == "two | three | four"
    # A traceback earlier in the log (a request's, handled) is not what ended it.
    log.write_text(
        'Traceback (most recent call last):\n  File "x", line 1\nOSError: reset\n'
        "GGML_ASSERT(n_tokens > 0) failed\nAborted\n",
        "utf-8",
    )
    assert localserver._tail(log) == "OSError: reset | GGML_ASSERT(n_tokens > 0) failed | Aborted"
