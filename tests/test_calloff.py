"""Work the app calls off when it closes (assistant.base.calloff): a wait on the teacher
or on drag serve ends at once, not at the request's timeout; a request given up sends
nothing more and is in the ledger as given up.  Real sockets on 127.0.0.1, the real
egress path."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assistant.base import calloff
from assistant.base.errors import Interrupted
from assistant.net import egress, loopback
from tests.conftest import SocketLog

HOUR = 3600.0  # a timeout no test waits for: only the call-off can end these waits


class FakeGuardPassingAll:
    """A guard that lets every body through (what is judged here is the call-off), and
    counts the attempts that reached the HTTP client's hook (it reads their headers)."""

    def __init__(self) -> None:
        self.hooked = 0

    def check_body(self, body: bytes, request: object) -> None:
        return None

    def check_headers(self, headers: dict[str, str], request: object) -> None:
        self.hooked += 1


def test_waking_calls_at_the_set_at_once_when_already_set_and_not_after_the_block() -> None:
    call_off = calloff.CallOff()
    woken: list[str] = []
    with call_off.waking(lambda: woken.append("in the block")):
        assert woken == []
        call_off.set()
    assert woken == ["in the block"]
    with call_off.waking(lambda: woken.append("already set")):
        pass
    assert woken == ["in the block", "already set"]
    call_off.clear()
    with call_off.waking(lambda: woken.append("gone")):
        pass
    call_off.set()
    assert woken == ["in the block", "already set"]


def test_the_work_s_result_or_error_comes_back_when_nothing_calls_it_off() -> None:
    call_off = calloff.CallOff()
    gave_up: list[bool] = []
    said = "given up"
    assert calloff.unless_called_off(call_off, lambda: 42, give_up=gave_up.clear, said=said) == 42

    def fails() -> int:
        raise ValueError("the work's own error")

    with pytest.raises(ValueError, match="the work's own error"):
        calloff.unless_called_off(call_off, fails, give_up=lambda: gave_up.append(True), said=said)
    assert gave_up == []


@pytest.mark.timeout(120)  # the backstop: a wait the call-off does not end
def test_work_called_off_is_given_up_at_once_and_its_late_result_dropped() -> None:
    call_off = calloff.CallOff()
    started, release = threading.Event(), threading.Event()
    gave_up: list[bool] = []

    def slow() -> str:
        started.set()
        release.wait(HOUR)
        return "too late"

    def off_once_started() -> None:
        started.wait(60)
        call_off.set()

    threading.Thread(target=off_once_started, daemon=True).start()
    with pytest.raises(Interrupted, match="the app was closed"):
        calloff.unless_called_off(
            call_off, slow, give_up=lambda: gave_up.append(True), said="the app was closed"
        )
    release.set()
    assert gave_up == [True]


def test_work_called_off_before_it_began_never_runs() -> None:
    call_off = calloff.CallOff()
    call_off.set()
    ran: list[bool] = []
    gave_up: list[bool] = []
    with pytest.raises(Interrupted, match="closed"):
        calloff.unless_called_off(
            call_off, lambda: ran.append(True), give_up=lambda: gave_up.append(True), said="closed"
        )
    for thread in threading.enumerate():
        if thread.name == "drag-call-off":
            thread.join(60)
    assert ran == [] and gave_up == [True]


@pytest.fixture
def silent_server(socket_guard: SocketLog) -> Iterator[tuple[socket.socket, SocketLog]]:
    """A server on 127.0.0.1 that takes connections and answers only what a test sends."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(120)
        socket_guard.allowed.add(("127.0.0.1", server.getsockname()[1]))
        yield server, socket_guard


def _read_request(connection: socket.socket) -> bytes:
    """One HTTP request with a Content-Length body, read whole."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += connection.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += connection.recv(65536)
    return body


@pytest.mark.timeout(120)  # the backstop: a wait the call-off does not end
def test_a_teacher_request_called_off_ends_at_once_is_recorded_and_never_retried(
    silent_server: tuple[socket.socket, SocketLog],
) -> None:
    """The teacher takes the request and says nothing; the app closes.  The send ends
    (before, it waited for the timeout: an hour here), the ledger's record has the body
    and says it was given up; the connection then breaks and the HTTP client retries
    (max_retries 1): the retry is stopped before it leaves (one connection in all)."""
    server, log = silent_server
    port = server.getsockname()[1]
    call_off = calloff.CallOff()
    recorded: list[egress.Sent] = []
    ended = threading.Event()
    received: list[bytes] = []

    def teacher() -> None:
        connection, _ = server.accept()
        with connection:
            received.append(_read_request(connection))
            call_off.set()  # the app closes while the teacher is asked
            ended.wait(120)  # then the connection breaks: the client would retry

    helper = threading.Thread(target=teacher, daemon=True)
    helper.start()
    request = egress.ChatRequest(
        purpose="evidence",
        model="m",
        messages=({"role": "user", "content": "Why do leaves change colour?"},),
        max_tokens=16,
    )
    endpoint = egress.Endpoint(f"http://127.0.0.1:{port}/v1", timeout=HOUR, max_retries=1)
    guard = FakeGuardPassingAll()
    noted: list[bytes] = []
    with calloff.scope(call_off), pytest.raises(Interrupted, match="given up"):
        egress.send(endpoint, request, guard, record=recorded.append, before=noted.append)
    ended.set()
    helper.join(60)
    asking = [t for t in threading.enumerate() if t.name == "drag-call-off"]
    for thread in asking:  # the given-up request's own thread: its retry, then its end
        thread.join(60)
        assert not thread.is_alive()
    assert guard.hooked == 2  # the retry was made, and stopped in the hook
    assert len(received) == 1 and len(log.seen) == 1 and len(noted) == 1, log.seen
    (sent,) = recorded
    assert sent.body == received[0] and sent.error == egress.GIVEN_UP and sent.reply is None


class FakeGuardTheAppClosesDuring(FakeGuardPassingAll):
    """Lets every body through; the app closes while it judges the exact bytes, and it
    finishes only once the send has been given up."""

    def __init__(self, call_off: calloff.CallOff) -> None:
        super().__init__()
        self.call_off = call_off
        self.given_up = threading.Event()

    def check_headers(self, headers: dict[str, str], request: object) -> None:
        super().check_headers(headers, request)
        self.call_off.set()
        self.given_up.wait(60)


@pytest.mark.timeout(120)  # the backstop: a wait the call-off does not end
def test_a_request_given_up_before_it_left_writes_no_note_and_sends_nothing(
    silent_server: tuple[socket.socket, SocketLog],
) -> None:
    """A review (a helper) of the call-off: the ledger's note of an upload under way was
    written after the request was given up (the guard's last look takes its time), and a
    next start would have taken it for an upload that may have reached the teacher."""
    server, log = silent_server
    call_off = calloff.CallOff()
    guard = FakeGuardTheAppClosesDuring(call_off)
    recorded: list[egress.Sent] = []
    noted: list[bytes] = []
    request = egress.ChatRequest(
        purpose="evidence", model="m", messages=({"role": "user", "content": "Why?"},), max_tokens=8
    )
    url = f"http://127.0.0.1:{server.getsockname()[1]}/v1"
    endpoint = egress.Endpoint(url, timeout=HOUR, max_retries=0)
    with calloff.scope(call_off), pytest.raises(Interrupted, match="given up"):
        egress.send(endpoint, request, guard, record=recorded.append, before=noted.append)
    guard.given_up.set()
    for thread in threading.enumerate():
        if thread.name == "drag-call-off":
            thread.join(60)
    assert guard.hooked == 1 and noted == [] and recorded == [] and log.seen == []


@pytest.mark.timeout(120)  # the backstop: a wait the call-off does not end
def test_a_wait_on_drag_serve_called_off_ends_at_once(
    silent_server: tuple[socket.socket, SocketLog],
) -> None:
    """drag serve took the question and went quiet (the teacher is slow); the app
    closes.  The read ends at once (before, at its timeout: an hour here) with the
    call-off's error, and the server sees its client go."""
    server, _log = silent_server
    port = server.getsockname()[1]
    call_off = calloff.CallOff()
    gone, accepted = threading.Event(), threading.Event()

    def serve() -> None:
        connection, _ = server.accept()
        with connection:
            _read_request(connection)
            head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
            # One line, not the blank one after it: the next read waits on the socket.
            connection.sendall(head + b'data: {"accepted": true}\n')
            accepted.wait(60)
            call_off.set()  # the app closes (another thread) while the client reads on
            if connection.recv(1) == b"":  # the client closed its end
                gone.set()

    helper = threading.Thread(target=serve, daemon=True)
    helper.start()
    read: list[dict[str, object]] = []
    url = f"http://127.0.0.1:{port}"
    with calloff.scope(call_off), pytest.raises(Interrupted, match="given up"):
        for event in loopback.events(url, "/ask", "token", {"question": "q"}, HOUR):
            read.append(event)
            accepted.set()
    assert read == [{"accepted": True}]
    helper.join(60)
    assert gone.is_set()


@pytest.fixture(scope="module")
def student(test_model_path: Path) -> Any:
    from assistant.models.student import Student

    return Student(test_model_path, n_ctx=1024)


COUNT = [{"role": "user", "content": "Count from one to fifty in words, one per line."}]


@pytest.mark.parametrize("how", ["free", "drafted", "grammar", "after a probe"])
def test_a_models_reply_called_off_stops_at_its_next_piece(student: Any, how: str) -> None:
    """The app closed while a local model wrote (the privacy reader, the student): the
    worker went on to the reply's end (a reader's slow reading, 23 s at p90, held the
    app's end that long).  The real llama.cpp model stops at the piece after the
    call-off, whichever way it decodes."""
    call_off = calloff.CallOff()
    told: list[str] = []

    def on_text(piece: str) -> None:
        told.append(piece)
        call_off.set()  # the app closes once the reply has begun

    began = student.probe(COUNT, max_tokens=2) if how == "after a probe" else None
    with calloff.scope(call_off), pytest.raises(Interrupted, match=calloff.CALLED_OFF):
        if began is not None:
            student.answer_after(began, COUNT, max_tokens=200, on_text=on_text)
        else:
            schema = {"type": "array", "items": {"type": "string"}} if how == "grammar" else None
            student.chat(
                COUNT, max_tokens=200, on_text=on_text, schema=schema, draft=how == "drafted"
            )
    assert len(told) == 1, told


def test_a_probe_called_off_stops_at_its_next_token(student: Any) -> None:
    call_off = calloff.CallOff()
    call_off.set()
    with calloff.scope(call_off), pytest.raises(Interrupted, match=calloff.CALLED_OFF):
        student.probe(COUNT, max_tokens=200)
    assert student.probe(COUNT, max_tokens=3).tokens  # and the model goes on working
