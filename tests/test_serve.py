"""`drag serve`: OpenAI's chat API on the loopback interface, with the privacy layer in
front of the teacher (issue 50).

The server runs in this process on a free port with the real parts (Presidio, SQLite,
the egress guard, the ledger), reached with the real ``openai`` client.  The curious
teacher that writes back what it received (tests/hostile_teacher.py, mode ``echo``) shows
what left and what was restored; the real llama_cpp.server answers the end-to-end tests.
"""

from __future__ import annotations

import contextlib
import gc
import http.client
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from click.testing import CliRunner

from assistant.base import config
from assistant.base.errors import InputError, PrivacyError
from assistant.cli import cli
from assistant.core import drafts, proxy
from assistant.core.session import Session
from assistant.serve import server as serving
from assistant.serve import tokens
from assistant.store import Store, ledger
from tests import hostile_teacher
from tests.conftest import TEST_MODEL, SocketLog, signalled_through_its_stop
from tests.fakes import FakeGuardPassingAll
from tests.test_cli_errors import drag, one_line_error

NAME, MAIL = "Jonathan Whitfield", "jonathan.whitfield@example.com"
OTHER_NAME, OTHER_MAIL = "Margaret Holloway", "m.holloway@example.org"


def note_for(name: str, mail: str) -> str:
    return f"Write a two-line note to {name} ({mail}) saying the invoice is paid."


@pytest.fixture(scope="module")
def curious() -> Iterator[hostile_teacher.HostileTeacher]:
    teacher = hostile_teacher.start()
    yield teacher
    teacher.close()


@pytest.fixture
def holding(curious: hostile_teacher.HostileTeacher) -> Iterator[hostile_teacher.HostileTeacher]:
    """The curious teacher in mode "hold", nothing held or released from another test."""
    with curious.holding():
        yield curious


@contextlib.contextmanager
def running(queue: int = 8, keep_alive: float = 0.0) -> Iterator[serving.Server]:
    """A drag serve on a free loopback port, in this process, with this test's settings."""
    server = serving.Server(
        ("127.0.0.1", 0), Session(config.load()), queue=queue, keep_alive=keep_alive
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        # As drag serve does: a request still under way ends before the models close
        # (a model closed under its decoding thread would crash the test run).
        if server.work.acquire(timeout=120):
            server.work.release()
            server.session.close()


def client_of(server: serving.Server, name: str = tokens.DEFAULT) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=server.url, api_key=tokens.token_for(name), max_retries=0, timeout=120
    )


@pytest.fixture
def echo_env(
    curious: hostile_teacher.HostileTeacher,
    socket_guard: SocketLog,
    monkeypatch: pytest.MonkeyPatch,
) -> SocketLog:
    """Settings that send to the curious teacher, values replaced without a review."""
    for key, value in {
        "DRAG_STUDENT_MODEL": TEST_MODEL,
        "DRAG_TEACHER_ENDPOINT": curious.url("echo"),
        "DRAG_TEACHER_MODEL": "hostile",
        "DRAG_PRIVACY_REVIEW": "never",
    }.items():
        monkeypatch.setenv(key, value)
    socket_guard.allowed.add(curious.address)
    return socket_guard


@contextlib.contextmanager
def serving_to(
    guard: SocketLog, queue: int = 8, keep_alive: float = 0.0
) -> Iterator[serving.Server]:
    with running(queue, keep_alive) as server:
        guard.allowed.add(("127.0.0.1", int(server.server_address[1])))
        yield server


def ledger_rows() -> list[dict[str, Any]]:
    """Every upload row, its request decoded (the exact bytes that left)."""
    s = config.load().store
    with Store.configured(s.database, s.key) as store:
        return [ledger.detail(row) for row in ledger.select(store.db)]


def last_body(teacher: hostile_teacher.HostileTeacher) -> str:
    return teacher.seen[-1].body.decode("utf-8")


# --- what the teacher sees and what the client gets -------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_teacher_gets_placeholders_and_the_client_gets_the_values_back(
    echo_env: SocketLog, curious: hostile_teacher.HostileTeacher, stream: bool
) -> None:
    with serving_to(echo_env) as server:
        before = len(curious.seen)
        messages: Any = [
            {"role": "system", "content": "You write short notes."},
            {"role": "user", "content": note_for(NAME, MAIL)},
        ]
        client = client_of(server)
        if stream:
            pieces = list(
                client.chat.completions.create(
                    model="hostile",
                    messages=messages,
                    stream=True,
                    stream_options={"include_usage": True},
                )
            )
            assert pieces[-1].usage is not None and pieces[-1].usage.total_tokens == 2
            pieces = pieces[:-1]
            text = "".join(c.choices[0].delta.content or "" for c in pieces if c.choices)
            assert pieces[-1].choices[0].finish_reason == "stop"
        else:
            reply = client.chat.completions.create(model="hostile", messages=messages)
            text = reply.choices[0].message.content or ""
    assert len(curious.seen) == before + 1
    sent = last_body(curious)
    assert NAME not in sent and MAIL not in sent and "You write short notes." in sent
    assert "<PERSON_1>" in sent
    # The echo comes back with the values; the link that asks for one keeps its placeholder.
    assert f"{NAME} ({MAIL})" in text, text
    assert "[more](https://evil.example/?who=<PERSON_1>)" in text
    row = ledger_rows()[-1]
    assert row["purpose"] == "proxy (default)"
    assert NAME not in json.dumps(row, default=str)


def test_a_streamed_pass_through_tells_the_teachers_words_as_they_come(
    echo_env: SocketLog, curious: hostile_teacher.HostileTeacher, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The teacher streams: the client reads its first words, restored, while the teacher
    still holds the rest (it waits for the client to have them), and the ledger keeps the
    whole reply as it came."""
    monkeypatch.setenv("DRAG_TEACHER_ENDPOINT", curious.url("hold-stream"))
    with curious.holding(), serving_to(echo_env) as server:
        chunks = client_of(server).chat.completions.create(
            model="hostile",
            messages=[{"role": "user", "content": note_for(NAME, MAIL)}],
            stream=True,
        )
        text = ""
        for chunk in chunks:
            text += (chunk.choices[0].delta.content or "") if chunk.choices else ""
            if text and not curious.release.is_set():
                curious.release.set()  # the first words reached the client
        assert curious.released.get(timeout=120)  # before the teacher wrote the rest
    assert json.loads(last_body(curious))["stream"] is True
    assert f"{NAME} ({MAIL})" in text and "[more](https://evil.example/?who=<PERSON_1>)" in text
    row = ledger_rows()[-1]
    assert row["status"] == "ok" and row["reply"].startswith("You said: ")
    assert "<PERSON_1>" in row["reply"] and NAME not in row["reply"]


def test_a_pass_through_never_takes_in_a_conversation_the_server_answered_before(
    echo_env: SocketLog, curious: hostile_teacher.HostileTeacher
) -> None:
    """A "drag" answer leaves its conversation's placeholders in the store; the next
    pass-through (another client's, with placeholders of its own) must not read them: the
    curious teacher's "Dear <PERSON_1>" stays a placeholder, not that conversation's name."""
    from assistant.privacy.placeholders import Vault

    with Session(config.load()) as runtime:
        talk = runtime.store.new_conversation(title="a drag answer")
        kept = Vault()
        kept.placeholder("PERSON", NAME)
        runtime.store.save_vault(talk, kept.dump())
        runtime.conversation_id = talk  # as the pipeline leaves it once it has answered
        body = {"model": "hostile", "messages": [{"role": "user", "content": "Say hello."}]}
        call = proxy.parse(body, 10_000, ["hostile"])
        reply = proxy.forward(runtime, call, "another")
    assert "Dear <PERSON_1>." in reply.text and NAME not in reply.text


def test_two_clients_keep_their_own_placeholders_and_values(
    echo_env: SocketLog, curious: hostile_teacher.HostileTeacher
) -> None:
    """Each request has its own vault: both names leave as the first placeholder of its
    request, and each client gets only its own name back."""
    with serving_to(echo_env) as server:
        one = client_of(server).chat.completions.create(
            model="hostile", messages=[{"role": "user", "content": note_for(NAME, MAIL)}]
        )
        first = last_body(curious)
        two = client_of(server, "other-tool").chat.completions.create(
            model="hostile",
            messages=[{"role": "user", "content": note_for(OTHER_NAME, OTHER_MAIL)}],
        )
        second = last_body(curious)
    assert "<PERSON_1>" in first and "<PERSON_1>" in second
    assert NAME in (one.choices[0].message.content or "")
    mine, theirs = one.choices[0].message.content or "", two.choices[0].message.content or ""
    assert OTHER_NAME not in mine and NAME not in theirs
    assert f"Dear {OTHER_NAME}." in theirs and f"Dear {NAME}." in mine
    assert [r["purpose"] for r in ledger_rows()[-2:]] == ["proxy (default)", "proxy (other-tool)"]


def test_the_same_earlier_messages_give_the_same_placeholders(
    echo_env: SocketLog, curious: hostile_teacher.HostileTeacher
) -> None:
    first = {"role": "user", "content": note_for(NAME, MAIL)}
    with serving_to(echo_env) as server:
        client = client_of(server)
        reply = client.chat.completions.create(model="hostile", messages=[first])  # type: ignore[list-item]
        once = json.loads(last_body(curious))["messages"]
        answer = {"role": "assistant", "content": reply.choices[0].message.content}
        later = {"role": "user", "content": f"Now one to {OTHER_NAME} too."}
        client.chat.completions.create(model="hostile", messages=[first, answer, later])  # type: ignore[list-item]
        again = json.loads(last_body(curious))["messages"]
    assert again[0] == once[0]
    assert "<PERSON_1>" in again[1]["content"] and "<PERSON_2>" in again[2]["content"]
    assert NAME not in json.dumps(again) and OTHER_NAME not in json.dumps(again)


# --- what is refused --------------------------------------------------------------------


@pytest.mark.parametrize("model", ["hostile", pytest.param("drag", marks=pytest.mark.integration)])
def test_a_request_that_needs_a_review_is_not_sent_and_kept_as_a_draft(
    echo_env: SocketLog,
    curious: hostile_teacher.HostileTeacher,
    monkeypatch: pytest.MonkeyPatch,
    model: str,
) -> None:
    monkeypatch.setenv("DRAG_PRIVACY_REVIEW", "on-detection")
    with serving_to(echo_env) as server:
        before = len(curious.seen)
        with pytest.raises(openai.PermissionDeniedError) as caught:
            client_of(server).chat.completions.create(
                model=model, messages=[{"role": "user", "content": note_for(NAME, MAIL)}]
            )
    assert len(curious.seen) == before  # nothing reached the teacher
    error = caught.value.body
    assert isinstance(error, dict) and error["code"] == "not_sent"
    assert "review" in error["message"]
    assert f"drag drafts release {error['draft']}" in error["message"]
    kept = drafts.read(error["draft"])
    assert NAME in kept["question"] and "proxy, client default" in kept["error"]


def test_a_released_draft_lets_the_same_request_through_once(
    echo_env: SocketLog, curious: hostile_teacher.HostileTeacher, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRAG_PRIVACY_REVIEW", "on-detection")
    messages: Any = [{"role": "user", "content": note_for(NAME, MAIL)}]
    with serving_to(echo_env) as server:
        client = client_of(server)
        with pytest.raises(openai.PermissionDeniedError) as caught:
            client.chat.completions.create(model="hostile", messages=messages)
        draft = caught.value.body["draft"]  # type: ignore[index]
        other = client_of(server, "other-tool")
        with pytest.raises(openai.PermissionDeniedError):  # another client's is its own
            other.chat.completions.create(model="hostile", messages=messages)
        released = CliRunner().invoke(cli, ["drafts", "release", draft])
        assert released.exit_code == 0, released.output
        before = len(curious.seen)
        with pytest.raises(openai.PermissionDeniedError):  # the same words, another client
            other.chat.completions.create(model="hostile", messages=messages)
        reply = client.chat.completions.create(model="hostile", messages=messages)
        assert len(curious.seen) == before + 1 and NAME not in last_body(curious)
        assert NAME in (reply.choices[0].message.content or "")
        with pytest.raises(openai.PermissionDeniedError):  # once
            client.chat.completions.create(model="hostile", messages=messages)
    assert len(curious.seen) == before + 1
    # Taken when it passed (other tests' drafts share this session's DRAG_HOME).
    assert not [r for r in drafts.listing() if r.get("released") and r["name"] == draft]


def test_no_token_or_a_wrong_one_is_401(echo_env: SocketLog) -> None:
    with serving_to(echo_env) as server:
        for key in ("not-a-token", tokens.token_for(tokens.DEFAULT) + "x"):
            bad = openai.OpenAI(base_url=server.url, api_key=key, max_retries=0)
            with pytest.raises(openai.AuthenticationError):
                bad.models.list()
        assert [m.id for m in client_of(server).models.list()] == ["drag", "hostile"]


def raw(
    server: serving.Server, method: str, path: str, headers: dict[str, str], body: bytes = b""
) -> tuple[int, dict[str, Any]]:
    connection = http.client.HTTPConnection("127.0.0.1", int(server.server_address[1]), timeout=30)
    try:
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value)
        connection.endheaders(body or None)
        reply = connection.getresponse()
        return reply.status, json.loads(reply.read())
    finally:
        connection.close()


def test_a_request_for_a_foreign_host_is_refused_even_with_the_token(echo_env: SocketLog) -> None:
    """DNS rebinding: a page whose name now points at 127.0.0.1 is not this machine's."""
    auth = {"Authorization": f"Bearer {tokens.token_for(tokens.DEFAULT)}"}
    with serving_to(echo_env) as server:
        port = server.server_address[1]
        status, body = raw(server, "GET", "/v1/models", {"Host": f"evil.example:{port}", **auth})
        assert status == 403 and body["error"]["code"] == "host_not_allowed"
        assert raw(server, "GET", "/v1/models", auth)[0] == 403  # no Host at all
        for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"):
            assert raw(server, "GET", "/v1/models", {"Host": host, **auth})[0] == 200


def test_bad_requests_get_one_line_openai_errors(
    echo_env: SocketLog, curious: hostile_teacher.HostileTeacher
) -> None:
    auth = {"Authorization": f"Bearer {tokens.token_for(tokens.DEFAULT)}", "Host": "localhost"}
    before = len(curious.seen)
    with serving_to(echo_env) as server:
        cases = {
            b"{not json": (400, "not JSON"),
            json.dumps(
                {"model": "hostile", "messages": [{"role": "user", "content": "hi"}], "tools": []}
            ).encode(): (400, "'tools'"),
            json.dumps(
                {
                    "model": "hostile",
                    "messages": [{"role": "user", "content": [{"type": "image_url"}]}],
                }
            ).encode(): (400, "only text parts"),
            json.dumps({"model": NAME, "messages": [{"role": "user", "content": "hi"}]}).encode(): (
                400,
                "the models offered are drag, hostile",
            ),
            b"[" * 100_000: (400, "not JSON"),  # nested past the parser's depth
            # An empty question, said for an HTTP client (it told it to pipe one on
            # standard input).
            json.dumps(
                {"model": "drag", "messages": [{"role": "user", "content": " "}]}
            ).encode(): (
                400,
                "the question is empty",
            ),
        }
        for body, (want, says) in cases.items():
            status, error = raw(
                server,
                "POST",
                "/v1/chat/completions",
                {**auth, "Content-Length": str(len(body))},
                body,
            )
            assert status == want and says in error["error"]["message"], error
            assert "\n" not in error["error"]["message"]
            assert "standard input" not in error["error"]["message"]
        status, error = raw(
            server,
            "POST",
            "/v1/chat/completions",
            {**auth, "Content-Length": str(serving.MAX_BODY + 1)},
        )
        assert status == 413
        status, error = raw(server, "POST", "/v1/chat/completions", {**auth, "Content-Length": "0"})
        assert status == 400 and error["error"]["code"] == "empty"
        status, error = raw(server, "POST", "/v1/chat/completions", auth)
        assert status == 411
    assert len(curious.seen) == before


def test_more_requests_than_the_queue_holds_get_429(echo_env: SocketLog) -> None:
    with serving_to(echo_env, queue=1) as server:
        server.work.acquire()  # the models are busy with a request of their own
        first: dict[str, Any] = {}

        def ask() -> None:
            try:
                first["reply"] = client_of(server).chat.completions.create(
                    model="hostile", messages=[{"role": "user", "content": "What is 2+2?"}]
                )
            except Exception as exc:  # told below
                first["error"] = exc

        waiting = threading.Thread(target=ask)
        waiting.start()
        try:
            queued = threading.Event()
            for _ in range(6000):  # the first request takes the one place in the queue
                if server.busy() == 1 or "error" in first:
                    queued.set()
                    break
                queued.wait(0.01)
            assert server.busy() == 1, first
            with pytest.raises(openai.RateLimitError):
                client_of(server).chat.completions.create(
                    model="hostile", messages=[{"role": "user", "content": "And 3+3?"}]
                )
        finally:
            server.work.release()
            waiting.join(timeout=120)
        assert "reply" in first, first  # answered once the models were free


def disk_full(*_args: object) -> int:
    """A store write on a full disk."""
    raise sqlite3.OperationalError("database or disk is full")


def test_a_ledger_that_cannot_record_stops_every_later_upload(
    echo_env: SocketLog, curious: hostile_teacher.HostileTeacher, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk that fills: the upload that left is told, and nothing more leaves."""
    with serving_to(echo_env) as server:
        monkeypatch.setattr(server.session.store, "record_upload", disk_full)
        before = len(curious.seen)
        client = client_of(server)
        question: Any = [{"role": "user", "content": "What is 2+2?"}]
        with pytest.raises(openai.InternalServerError, match="ledger"):
            client.chat.completions.create(model="hostile", messages=question)
        with pytest.raises(openai.InternalServerError, match="sends nothing more"):
            client.chat.completions.create(model="hostile", messages=question)
    assert len(curious.seen) == before + 1


def test_a_stream_cut_off_that_the_ledger_cannot_record_stops_every_later_upload(
    echo_env: SocketLog, curious: hostile_teacher.HostileTeacher, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The teacher breaks off its streamed reply and the disk is full: the client is
    told the ledger failed (after the words that came), and nothing more leaves."""
    monkeypatch.setenv("DRAG_TEACHER_MAX_RETRIES", "0")
    with serving_to(echo_env) as server:
        monkeypatch.setattr(server.session.store, "record_upload", disk_full)
        before = len(curious.seen)
        client = client_of(server)
        question: Any = [{"role": "user", "content": "What is 2+2?"}]
        curious.faults.put("cut")
        with pytest.raises(openai.APIError, match="ledger"):
            for _chunk in client.chat.completions.create(
                model="hostile", messages=question, stream=True
            ):
                pass
        with pytest.raises(openai.InternalServerError, match="sends nothing more"):
            client.chat.completions.create(model="hostile", messages=question)
    assert len(curious.seen) == before + 1


def test_an_upload_that_cannot_be_noted_before_it_leaves_is_not_sent(
    echo_env: SocketLog, curious: hostile_teacher.HostileTeacher, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ledger's note comes before the bytes reach the socket: no note, no upload."""
    with serving_to(echo_env) as server:
        monkeypatch.setattr(server.session.store, "begin_upload", disk_full)
        before = len(curious.seen)
        question: Any = [{"role": "user", "content": "What is 2+2?"}]
        with pytest.raises(openai.APIStatusError, match="nothing was sent") as refused:
            client_of(server).chat.completions.create(model="hostile", messages=question)
        assert "disk is full" in str(refused.value)
    assert len(curious.seen) == before and ledger_rows() == []


def journal_notes() -> int:
    s = config.load().store
    with Store.configured(s.database, s.key) as store:
        return int(store.db.execute("SELECT count(*) FROM upload_journal").fetchone()[0])


@pytest.mark.parametrize("fault", ["drop", "cut"])
def test_a_teacher_that_goes_away_mid_reply_is_an_error_and_the_next_request_works(
    fault: str,
    echo_env: SocketLog,
    curious: hostile_teacher.HostileTeacher,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DRAG_TEACHER_MAX_RETRIES", "0")  # one request, one send
    question: Any = [{"role": "user", "content": note_for(NAME, MAIL)}]
    with serving_to(echo_env) as server:
        client = client_of(server)
        before = len(curious.seen)
        curious.faults.put(fault)
        with pytest.raises(openai.APIStatusError) as failed:
            client.chat.completions.create(model="hostile", messages=question)
        assert failed.value.status_code == 502 and "\n" not in str(failed.value)
        reply = client.chat.completions.create(model="hostile", messages=question)
    assert curious.faults.empty() and len(curious.seen) == before + 2  # nothing sent twice
    assert NAME in (reply.choices[0].message.content or "")
    rows = ledger_rows()
    assert [r["status"] for r in rows] == ["error", "ok"] and rows[0]["reply"] is None
    assert rows[0]["request"].encode() == curious.seen[before].body
    assert journal_notes() == 0 and drag("audit", "verify").returncode == 0


@pytest.mark.parametrize(
    ("fault", "said"),
    [("cut", "broke off its streamed reply"), ("unfinished", "without saying it was complete")],
)
def test_a_streamed_reply_cut_off_is_told_as_far_as_it_came_then_an_error(
    echo_env: SocketLog,
    curious: hostile_teacher.HostileTeacher,
    monkeypatch: pytest.MonkeyPatch,
    fault: str,
    said: str,
) -> None:
    """The teacher goes away mid-stream, or ends it with no finish reason: the client
    has the words that came (restored) and then an error; the ledger keeps them under an
    error; the next request works."""
    monkeypatch.setenv("DRAG_TEACHER_MAX_RETRIES", "0")
    question: Any = [{"role": "user", "content": note_for(NAME, MAIL)}]
    with serving_to(echo_env) as server:
        client = client_of(server)
        before = len(curious.seen)
        curious.faults.put(fault)
        text = ""
        with pytest.raises(openai.APIError) as failed:
            for chunk in client.chat.completions.create(
                model="hostile", messages=question, stream=True
            ):
                text += (chunk.choices[0].delta.content or "") if chunk.choices else ""
        assert said in str(failed.value)
        assert text == f"You said: {NAME} and "
        reply = client.chat.completions.create(model="hostile", messages=question)
    assert len(curious.seen) == before + 2 and NAME in (reply.choices[0].message.content or "")
    rows = ledger_rows()
    assert [r["status"] for r in rows] == ["error", "ok"]
    assert rows[0]["reply"] == "You said: <PERSON_1> and " and said in rows[0]["error"]
    assert journal_notes() == 0 and drag("audit", "verify").returncode == 0


def test_a_client_gone_before_the_reply_ends_it_recorded_and_the_server_working(
    echo_env: SocketLog,
    holding: hostile_teacher.HostileTeacher,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A forwarded reply whose client went is read no further (a local teacher is shared:
    the others would wait for a reply written for no one); its upload is recorded with
    what came and why it ended, and the server goes on to the next request."""
    monkeypatch.setenv("DRAG_TEACHER_ENDPOINT", holding.url("hold"))
    question = {"role": "user", "content": note_for(NAME, MAIL)}
    with serving_to(echo_env) as server:
        port = int(server.server_address[1])
        gone = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        body = json.dumps({"model": "hostile", "messages": [question], "stream": True})
        headers = {
            "Authorization": f"Bearer {tokens.token_for(tokens.DEFAULT)}",
            "Content-Type": "application/json",
        }
        gone.request("POST", "/v1/chat/completions", body=body, headers=headers)
        holding.held.get(timeout=120)  # it reached the teacher; the client goes
        gone.close()
        holding.release.set()
        reply = client_of(server).chat.completions.create(model="hostile", messages=[question])
        assert NAME in (reply.choices[0].message.content or "")
        deadline = time.monotonic() + 120  # the request of the client that went ends
        while len(ledger_rows()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    rows = ledger_rows()
    assert [r["status"] for r in rows] == ["error", "ok"] and journal_notes() == 0
    assert "client went away before the end of the reply" in rows[0]["error"]


@pytest.mark.parametrize(
    ("fault", "looked"), [("", False), ("cut", True)], ids=["reader-failed", "teacher-failed"]
)
def test_a_reply_its_reader_could_not_pass_on_is_not_looked_at_as_a_crash(
    curious: hostile_teacher.HostileTeacher, socket_guard: SocketLog, fault: str, looked: bool
) -> None:
    """A streamed reply whose reader fails (drag serve's client went away) ends it; the
    teacher is not at fault, so no crash of it is looked for (for a local teacher that
    look waits a second, holding the work the others wait for). A reply the teacher
    broke off is looked at."""
    from assistant.base.errors import NotPassedOn, TeacherError
    from assistant.models.teacher import Teacher
    from assistant.net import egress

    socket_guard.allowed.add(curious.address)
    diagnosed: list[bool] = []

    def diagnose() -> None:
        diagnosed.append(True)

    def reader_gone(piece: str) -> None:
        raise OSError("the client went away")

    teacher = Teacher(
        egress.Endpoint(curious.url("echo"), max_retries=0),
        "hostile",
        "off",
        guard=FakeGuardPassingAll(),
        diagnose=diagnose,
    )
    request = egress.ChatRequest(
        purpose="chat",
        model="hostile",
        messages=({"role": "user", "content": "Say hello."},),
        max_tokens=16,
        stream=True,
    )
    if fault:
        curious.faults.put(fault)
    with pytest.raises(TeacherError) as failed:
        teacher.complete(request, None if fault else reader_gone)
    assert isinstance(failed.value, NotPassedOn) is not looked
    assert diagnosed == ([True] if looked else [])


def test_the_models_are_let_go_after_keep_alive_idle_and_loaded_again(
    echo_env: SocketLog,
) -> None:
    question: Any = [{"role": "user", "content": f"Write to {NAME} about lunch."}]
    with serving_to(echo_env, keep_alive=300) as server:
        client = client_of(server)
        client.chat.completions.create(model="hostile", messages=question)
        first = weakref.ref(server.session)
        assert server.loaded() == ["detector", "teacher"]
        assert not server.unload_if_idle(now=server.last_used + 299)  # not idle long enough
        server.work.acquire()  # a request under way
        assert not server.unload_if_idle(now=server.last_used + 301)
        server.work.release()
        assert server.unload_if_idle(now=server.last_used + 301)
        assert server.loaded() == []
        gc.collect()
        assert first() is None  # nothing holds the old models: their memory is freed
        reply = client.chat.completions.create(model="hostile", messages=question)
        assert NAME in (reply.choices[0].message.content or "")
        assert server.loaded() == ["detector", "teacher"]


# --- the parts on their own ---------------------------------------------------------------


def test_parse_refuses_what_it_would_not_pass_on() -> None:
    ok = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert proxy.parse(ok, 100, ["m"]).messages == (proxy.Message("user", "hi"),)
    parts = {
        "model": "m",
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            }
        ],
    }
    assert proxy.parse(parts, 100, ["m"]).messages[0].content == "a\nb"  # never glued
    for bad, says in [
        ({**ok, "response_format": {}}, "'response_format'"),
        ({**ok, "n": 2}, "n must be 1"),
        ({**ok, "temperature": float("nan")}, "temperature"),
        ({**ok, "max_tokens": 10**400}, "max_tokens must be a number"),
        ({**ok, "model": "Jonathan Whitfield"}, "the models offered are m"),
        ({**ok, "messages": [{"role": "user", "content": "x", "name": "Jon"}]}, "'name'"),
        ({**ok, "messages": [{"role": "tool", "content": "x"}]}, "role"),
        ({**ok, "messages": [{"role": "user", "content": "x" * 101}]}, "more than 100"),
        ({**ok, "messages": [{"role": "robot", "content": "x"}]}, "role"),
        (
            {**ok, "messages": [{"role": "assistant", "content": "", "tool_calls": [{}]}]},
            "tool calls",
        ),
        ([], "JSON object"),
    ]:
        with pytest.raises(InputError, match=says):
            proxy.parse(bad, 100, ["m"])


@pytest.mark.parametrize(
    ("header", "here"),
    [
        ("localhost:8778", True),
        ("127.0.0.1", True),
        ("[::1]:80", True),
        ("127.0.0.2:8778", True),  # any address: only a name can be rebound
        ("LOCALHOST", True),
        ("localhost.evil.com", False),
        ("127.0.0.1.evil", False),
        ("[::1]evil.com", False),
        ("[::1]:80@evil", False),
        ("localhost:80:80", False),
        ("evil.example:8778", False),
        ("", False),
        (None, False),
    ],
)
def test_a_host_is_answered_by_its_address_or_localhost_only(
    header: str | None, here: bool
) -> None:
    assert serving.addressed_here(header, frozenset()) is here


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("http://127.0.0.1:8778", True),
        ("http://localhost:8778", True),
        ("http://[::1]:8778", True),
        ("http://127.0.0.1.evil.example:80", False),
        ("http://evil.example:8778", False),
        ("https://127.0.0.1:8778", False),
        ("http://127.0.0.1", False),
        ("http://user@evil.example:80", False),
    ],
)
def test_the_cli_connects_to_loopback_addresses_only(url: str, ok: bool) -> None:
    from assistant.net import loopback

    if ok:
        assert loopback.loopback_host(url)[1] == 8778
    else:
        with pytest.raises(ValueError, match="not a loopback address"):
            loopback.loopback_host(url)


def test_a_client_is_known_by_its_token_only() -> None:
    held = {"default": "abc", "tool": "xyz"}
    assert tokens.client_of("Bearer xyz", held) == "tool"
    assert tokens.client_of("bearer xyz", held) == "tool"
    assert tokens.client_of("Bearer ", {"empty": ""}) is None
    assert tokens.client_of("Bearer xy", held) is None
    assert tokens.client_of("xyz", held) is None
    assert tokens.client_of(None, held) is None


# --- the command ------------------------------------------------------------------------


def test_serve_token_is_kept_for_the_owner_only() -> None:
    result = CliRunner().invoke(cli, ["serve", "--token"])
    assert result.exit_code == 0
    assert result.output.strip() == tokens.tokens()[tokens.DEFAULT]
    assert tokens.token_file().stat().st_mode & 0o777 == 0o600
    assert "a client name is" in one_line_error(drag("serve", "--token", "Bad Name"))


def test_serve_refuses_another_address_without_allow_network() -> None:
    refused = drag("serve", "--host", "0.0.0.0")
    assert refused.returncode == 2 and "--allow-network" in one_line_error(refused)
    # An empty host is every interface (the sentence had a hole where it goes).
    refused = drag("serve", "--host", "")
    assert '; "" (every interface) needs --allow-network' in one_line_error(refused)


def serve_process(env: dict[str, str], *options: str) -> subprocess.Popen[str]:
    """``drag serve OPTIONS`` in a process of its own, its output read as text."""
    return subprocess.Popen(
        [sys.executable, "-m", "assistant", "serve", *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, "PYTHONFAULTHANDLER": "1"},  # SIGABRT: where each thread was
    )


def stopped(serve: subprocess.Popen[str]) -> int:
    """SIGTERM, then its exit status.  One still running a minute later is made to
    write where each of its threads was (faulthandler, on SIGABRT) and the test fails
    with that: a stop that hangs is shown, not only timed out."""
    serve.send_signal(signal.SIGTERM)
    try:
        return serve.wait(timeout=60)
    except subprocess.TimeoutExpired:
        serve.send_signal(signal.SIGABRT)
        _out, err = serve.communicate(timeout=60)
        pytest.fail(
            f"drag serve did not stop within 60 s of SIGTERM; its threads:\n{err[-8000:]}",
            pytrace=False,
        )


def test_serve_stops_on_sigterm_that_its_parent_left_blocked(
    curious: hostile_teacher.HostileTeacher,
) -> None:
    """A blocked signal stays blocked across exec, and a handler does not unblock it:
    started by a parent (a supervisor, a test runner's thread) with SIGTERM blocked,
    `drag serve` would wait in its loop for ever (seen in a full test run: the main
    thread in select, no handler called).  It unblocks the signals it stops on."""
    env = {**os.environ, "DRAG_TEACHER_ENDPOINT": curious.url("echo"), "DRAG_TEACHER_MODEL": "x"}

    def blocked() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})

    serve = subprocess.Popen(
        [sys.executable, "-m", "assistant", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, "PYTHONFAULTHANDLER": "1"},
        preexec_fn=blocked,
    )
    try:
        assert serve.stdout is not None
        assert "listening on http://127.0.0.1:" in serve.stdout.readline()
        assert stopped(serve) == 0
    finally:
        if serve.poll() is None:
            serve.kill()


def test_two_signals_at_once_stop_an_idle_server_cleanly(
    curious: hostile_teacher.HostileTeacher,
) -> None:
    """A second signal that comes while the first is handled (SIGTERM and SIGINT
    together, as a supervisor and a terminal may send them) does not cut the stop short:
    exit 0, its state file gone."""
    env = {**os.environ, "DRAG_TEACHER_ENDPOINT": curious.url("echo"), "DRAG_TEACHER_MODEL": "x"}
    serve, _url = start_serve(env)
    try:
        serve.send_signal(signal.SIGTERM)
        serve.send_signal(signal.SIGINT)
        code = serve.wait(timeout=60)
        assert serve.stderr is not None
        said = serve.stderr.read()
        assert code == 0, said
        assert "Traceback" not in said
        assert "no drag serve is running" in drag("serve", "--status", env=env).stdout.decode()
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()


def test_signals_all_through_the_stop_and_the_exit_do_not_cut_them_short(
    curious: hostile_teacher.HostileTeacher,
) -> None:
    """Signals that keep coming after the first (a supervisor repeating its SIGTERM, a
    user pressing Ctrl+C again), during the stop and as the process exits, change
    nothing: exit 0, no traceback.  (The handlers that were put back once the stop had
    ended let a late SIGINT end the process by that signal, or raise in its exit.)"""
    env = {**os.environ, "DRAG_TEACHER_ENDPOINT": curious.url("echo"), "DRAG_TEACHER_MODEL": "x"}
    serve, _url = start_serve(env)
    try:
        if not signalled_through_its_stop(serve):  # where each of its threads was, not a hang
            serve.send_signal(signal.SIGABRT)
            _out, said = serve.communicate(timeout=60)
            pytest.fail(f"drag serve did not stop within 60 s; its threads:\n{said[-8000:]}")
        _out, said = serve.communicate(timeout=60)
        assert serve.returncode == 0, said
        assert "Traceback" not in said
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()


def test_serve_runs_says_so_and_stops_on_sigterm(curious: hostile_teacher.HostileTeacher) -> None:
    env = {
        **os.environ,
        "DRAG_TEACHER_ENDPOINT": curious.url("echo"),
        "DRAG_TEACHER_MODEL": "hostile",
    }
    down = CliRunner().invoke(cli, ["serve", "--status"], env=env)
    assert down.exit_code == 1 and "no drag serve is running" in down.output
    serve = serve_process(env, "--port", "0")
    try:
        assert serve.stdout is not None
        line = serve.stdout.readline()
        assert "drag serve: listening on http://127.0.0.1:" in line, (
            serve.stderr.read() if serve.stderr else line
        )
        up = CliRunner().invoke(cli, ["serve", "--status"], env=env)
        assert up.exit_code == 0 and f"(pid {serve.pid}); loaded: no model yet" in up.output
        client = openai.OpenAI(
            base_url=line.split("listening on ")[1].split()[0],
            api_key=tokens.token_for(tokens.DEFAULT),
            max_retries=0,
        )
        client.chat.completions.create(
            model="hostile", messages=[{"role": "user", "content": "What is 2+2?"}]
        )
        held = CliRunner().invoke(cli, ["serve", "--status"], env=env).output
        assert "loaded: detector, teacher" in held, held  # kept for the next request
        again = drag("serve", "--port", "0", env=env)
        assert again.returncode == 2 and "stop it first" in one_line_error(again)
        assert stopped(serve) == 0
    finally:
        if serve.poll() is None:
            serve.kill()
    assert serve.stderr is not None
    said = serve.stderr.read()
    assert "Traceback" not in said and "2+2" not in said, said  # nothing of a request logged
    assert not tokens.state_file().exists()


def machine_address() -> str | None:
    """An IPv4 address of this machine's that is not loopback (Linux: SIOCGIFADDR), or
    None; nothing is sent anywhere to find it."""
    import fcntl
    import socket
    import struct

    for _index, name in socket.if_nameindex():
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            packed = fcntl.ioctl(probe.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))
        except OSError:
            continue
        finally:
            probe.close()
        address = socket.inet_ntoa(packed[20:24])
        if not address.startswith("127."):
            return address
    return None


def status_of(address: str, port: int, headers: dict[str, str]) -> int:
    connection = http.client.HTTPConnection(address, port, timeout=30)
    try:
        connection.putrequest("GET", "/v1/models", skip_host=True, skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value)
        connection.endheaders()
        return connection.getresponse().status
    finally:
        connection.close()


def test_allow_network_listens_on_another_address_and_keeps_every_check(
    curious: hostile_teacher.HostileTeacher,
) -> None:
    """`drag serve --host ADDRESS --allow-network`: it warns that the traffic is plain
    HTTP; on that address a client without the token gets 401, a Host that is neither
    loopback nor that address 403, and one with both is answered."""
    address = machine_address()
    if address is None:
        pytest.skip("this machine has no address but loopback")
    env = {**os.environ, "DRAG_TEACHER_ENDPOINT": curious.url("echo"), "DRAG_TEACHER_MODEL": "x"}
    serve = serve_process(env, "--host", address, "--port", "0", "--allow-network")
    try:
        assert serve.stdout is not None
        said = [serve.stdout.readline() for _ in range(2)]
        assert "plain HTTP on the network" in said[0], said
        url = said[1].split("listening on ")[1].split()[0]
        assert url.startswith(f"http://{address}:")
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        key = {"Authorization": f"Bearer {tokens.token_for(tokens.DEFAULT)}"}
        here = {"Host": f"{address}:{port}"}
        assert status_of(address, port, {**here, **key}) == 200
        assert status_of(address, port, here) == 401
        assert status_of(address, port, {"Host": f"drag.example:{port}", **key}) == 403
        assert stopped(serve) == 0
    finally:
        if serve.poll() is None:
            serve.kill()


def start_serve(env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    """``drag serve`` in a process of its own on a free port; returns it and its URL."""
    serve = serve_process(env, "--port", "0")
    assert serve.stdout is not None
    line = serve.stdout.readline()
    assert "listening on http://127.0.0.1:" in line, serve.stderr.read() if serve.stderr else line
    return serve, line.split("listening on ")[1].split()[0]


def held_env(curious: hostile_teacher.HostileTeacher) -> dict[str, str]:
    """Settings for a `drag serve` whose teacher holds each request (mode "hold")."""
    return {
        **os.environ,
        "DRAG_TEACHER_ENDPOINT": curious.url("hold"),
        "DRAG_TEACHER_MODEL": "hostile",
        "DRAG_PRIVACY_REVIEW": "never",
    }


def ask_through(url: str, content: str, asked: list[BaseException]) -> None:
    """One request to the teacher through the `drag serve` at ``url``; an error the
    client raised is put on ``asked``."""
    client = openai.OpenAI(base_url=url, api_key=tokens.token_for(tokens.DEFAULT), max_retries=0)
    try:
        client.chat.completions.create(
            model="hostile", messages=[{"role": "user", "content": content}]
        )
    except openai.OpenAIError as exc:
        asked.append(exc)


def test_a_server_killed_during_a_request_leaves_that_upload_in_the_ledger(
    holding: hostile_teacher.HostileTeacher,
) -> None:
    curious = holding
    env = held_env(curious)
    asked: list[BaseException] = []

    def ask(url: str) -> None:
        ask_through(url, note_for(NAME, MAIL), asked)

    serve, url = start_serve(env)
    try:
        asking = threading.Thread(target=ask, args=(url,))
        asking.start()
        body = curious.held.get(timeout=120)  # the request has reached the teacher
        serve.kill()
        serve.wait(timeout=60)
        asking.join(timeout=60)
        assert asked and isinstance(asked[0], openai.APIConnectionError)
        verified = drag("audit", "verify", env=env)
        assert verified.returncode == 0, verified.stderr.decode()
        listed = drag("audit", "list", "--json", env=env)
        (row,) = json.loads(listed.stdout)
        shown = json.loads(drag("audit", "show", str(row["id"]), "--json", env=env).stdout)
        assert shown["request"].encode() == body and NAME not in shown["request"]
        assert shown["reply"] is None and "may have reached the teacher" in shown["error"]
        assert "proxy" in shown["purpose"]

        curious.release.set()  # started again, the next request works and is recorded
        serve, url = start_serve(env)
        ask(url)
        assert len(asked) == 1  # the one cut by the kill
        assert drag("audit", "verify", env=env).returncode == 0
        statuses = [
            r["status"] for r in json.loads(drag("audit", "list", "--json", env=env).stdout)
        ]
        assert statuses == ["error", "ok"]
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()


def test_a_second_signal_stops_the_wait_for_the_request_under_way(
    holding: hostile_teacher.HostileTeacher,
) -> None:
    """A stop waits up to a minute for the request under way (its ledger row is written
    whole) and says so; a second signal (Ctrl+C again) ends the wait, and the server
    still stops as it should: exit 0, its state file gone, no traceback (its models are
    not freed under the request: the process ends without closing them)."""
    curious = holding
    env = held_env(curious)
    asked: list[BaseException] = []
    serve, url = start_serve(env)
    asking = threading.Thread(target=ask_through, args=(url, "What is 2+2?", asked))
    try:
        asking.start()
        curious.held.get(timeout=120)  # the request has reached the teacher
        serve.send_signal(signal.SIGTERM)
        assert serve.stdout is not None
        said = serve.stdout.readline()
        assert "stopping when the request under way ends" in said, said
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=30) == 0  # without it: a minute
        assert "stopped with a request under way" in serve.stdout.readline()
        assert serve.stderr is not None and "Traceback" not in serve.stderr.read()
        assert "no drag serve is running" in drag("serve", "--status", env=env).stdout.decode()
    finally:
        curious.release.set()
        asking.join(timeout=60)
        if serve.poll() is None:
            serve.kill()
            serve.wait()
    assert asked and isinstance(asked[0], openai.APIConnectionError)


def _busy(url: str) -> int:
    """Chat requests in flight or waiting at the `drag serve` at ``url`` (its /health)."""
    request = urllib.request.Request(
        url.removesuffix("/v1") + "/health",
        headers={"Authorization": f"Bearer {tokens.token_for(tokens.DEFAULT)}"},
    )
    with urllib.request.urlopen(request, timeout=10) as reply:
        return int(json.loads(reply.read())["busy"])


def test_a_request_waiting_behind_the_one_under_way_is_refused_once_stopped(
    holding: hostile_teacher.HostileTeacher,
) -> None:
    """A stop lets the request under way end (its ledger row written whole); a request
    that waits for it is refused at once with the reason (503), while the first still
    runs: it never starts (a lock is not fair: the waiting request, not the stop, could
    take the models next and send its question), never reaches the teacher, and is not
    left to end with the process; the server then stops at once."""
    curious = holding
    env = held_env(curious)
    first: list[BaseException] = []
    second: list[BaseException] = []
    serve, url = start_serve(env)
    one = threading.Thread(target=ask_through, args=(url, "What is 2+2?", first))
    two = threading.Thread(target=ask_through, args=(url, "What is 3+3?", second))
    try:
        one.start()
        curious.held.get(timeout=120)  # the first has reached the teacher
        two.start()
        deadline = time.monotonic() + 60
        while _busy(url) < 2:  # the second waits for the first (a poll of a count)
            assert time.monotonic() < deadline, "the second request never arrived"
            time.sleep(0.05)
        serve.send_signal(signal.SIGTERM)
        assert serve.stdout is not None
        said = serve.stdout.readline()
        assert "stopping when the request under way ends" in said, said
        two.join(timeout=60)  # the first still holds the models
        assert not two.is_alive(), "the waiting request was not told while the first ran"
        assert len(second) == 1 and isinstance(second[0], openai.InternalServerError)
        assert "drag serve is stopping; nothing was sent" in str(second[0])
        curious.release.set()
        assert serve.wait(timeout=60) == 0
        one.join(timeout=60)
        assert not first  # the first was answered
        assert curious.held.empty(), "the waiting request reached the teacher"
        assert "stopped with a request under way" not in serve.stdout.read()
    finally:
        curious.release.set()
        one.join(timeout=60)
        two.join(timeout=60)
        if serve.poll() is None:
            serve.kill()
            serve.wait()


@pytest.mark.integration
def test_drag_model_answers_through_the_pipeline_streamed(
    on_teacher: dict[str, str], socket_guard: SocketLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Model "drag": the real teacher's evidence, the real tiny student's answer; cut off
    at student.max_tokens, which the last chunk says ("length", not "stop")."""
    monkeypatch.setenv("DRAG_PIPELINE_MODE", "evidence")
    monkeypatch.setenv("DRAG_PIPELINE_N", "3")
    monkeypatch.setenv("DRAG_PIPELINE_K", "2")
    monkeypatch.setenv("DRAG_STUDENT_MAX_TOKENS", "4")
    monkeypatch.setenv("DRAG_PRIVACY_REVIEW", "never")
    with serving_to(socket_guard) as server:
        chunks = list(
            client_of(server).chat.completions.create(
                model="drag",
                messages=[{"role": "user", "content": "What gas do plants take in?"}],
                stream=True,
            )
        )
        assert sorted(server.loaded()) == ["detector", "embedder", "student", "teacher"]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.strip() and chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == "length"
    assert [r["purpose"] for r in ledger_rows()] == ["evidence"]


@pytest.mark.integration
def test_a_drag_answers_graph_is_built_after_its_client_has_gone_with_the_answer(
    on_teacher: dict[str, str], socket_guard: SocketLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Model "drag" with the graph built after the answer: the client has its answer and
    closes the connection; the graph for the cache is still asked of the teacher (a
    client gone stops what is done for it, not what is done for the cache)."""
    for key, value in {
        "DRAG_PIPELINE_MODE": "graph",
        "DRAG_PIPELINE_GRAPH_TIMING": "after-answer",
        "DRAG_PIPELINE_N": "3",
        "DRAG_PIPELINE_K": "2",
        "DRAG_STUDENT_MAX_TOKENS": "4",
        "DRAG_PRIVACY_REVIEW": "never",
    }.items():
        monkeypatch.setenv(key, value)
    with serving_to(socket_guard) as server:
        asked = http.client.HTTPConnection("127.0.0.1", int(server.server_address[1]), timeout=300)
        headers = {
            "Authorization": f"Bearer {tokens.token_for(tokens.DEFAULT)}",
            "Content-Type": "application/json",
        }
        body = {
            "model": "drag",
            "messages": [{"role": "user", "content": "What gas do plants take in?"}],
        }
        asked.request("POST", "/v1/chat/completions", json.dumps(body), headers)
        response = asked.getresponse()
        assert response.status == 200 and json.loads(response.read())["choices"]
        response.close()
        asked.close()  # the answer is had: the client goes
        ended(server)
    assert [r["purpose"] for r in ledger_rows()][:2] == ["evidence", "triples"]


@pytest.mark.integration
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_pass_through_to_the_real_teacher_server(
    on_teacher: dict[str, str],
    socket_guard: SocketLog,
    monkeypatch: pytest.MonkeyPatch,
    stream: bool,
) -> None:
    from assistant.models.localserver import ALIAS

    monkeypatch.setenv("DRAG_PRIVACY_REVIEW", "never")
    monkeypatch.setenv("DRAG_TEACHER_MAX_TOKENS", "16")
    question: Any = [{"role": "user", "content": note_for(NAME, MAIL)}]
    with serving_to(socket_guard) as server:
        client = client_of(server)
        if stream:
            chunks = list(
                client.chat.completions.create(model=ALIAS, messages=question, stream=True)
            )
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            assert text and sum(bool(c.choices and c.choices[0].delta.content) for c in chunks) > 1
        else:
            reply = client.chat.completions.create(model=ALIAS, messages=question)
            assert reply.choices[0].message.content and reply.usage
            assert reply.usage.completion_tokens > 0
        assert "student" not in server.loaded()  # a pass-through needs no student
    row = ledger_rows()[-1]
    assert row["purpose"] == "proxy (default)" and row["status"] == "ok"
    assert NAME not in row["request"] and MAIL not in row["request"]
    assert "<PERSON_1>" in row["request"]


def test_bench_serve_runs_in_a_home_of_its_own_and_counts_what_leaks(tmp_path: Path) -> None:
    before = sorted(tokens.tokens())
    done = drag(
        "bench", "serve", "--requests", "2", "--reader-requests", "0", "--seconds", "2",
        "--clients", "2", "--out", str(tmp_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    summary = json.loads((tmp_path / "summary.json").read_text())
    load = summary["load"]
    assert load["answered"] > 0 and load["mixed"] == load["errors"] == 0
    assert load["values_the_teacher_received"] == load["values_in_the_ledger"] == []
    assert load["ledger_verifies"]
    assert load["purposes"] == ["proxy (client-1)", "proxy (client-2)", "proxy (default)"]
    assert summary["cost"][0]["replies_with_the_name_restored"] == 3
    assert sorted(tokens.tokens()) == before  # its clients' keys were not made here


def test_the_published_serve_figures_are_the_stored_ones() -> None:
    root = Path(__file__).parents[1]
    summary = json.loads((root / "docs/results/serve-proxy/summary.json").read_text())
    text = (root / "docs/benchmarks.md").read_text("utf-8")
    for run, name in zip(summary["cost"], ["off", "on (the default)"], strict=True):
        d, p = run["direct"], run["proxy"]
        row = (
            f"| {name} | {run['requests']} | {d['p50']:.3f} / {d['p95']:.3f} s | "
            f"{p['p50']:.3f} / {p['p95']:.3f} s | {run['added_p50_seconds']:.3f} s |"
        )
        assert row in text, row
    load = summary["load"]
    said = (
        f"{load['answered']}\nanswered, {load['busy_429']} HTTP 429, {load['errors']} other "
        f"errors, {load['mixed']} replies mixed"
    )
    assert said in text and not load["values_the_teacher_received"] and load["ledger_verifies"]


# --- drag ask as a thin client ---------------------------------------------------------


@contextlib.contextmanager
def recorded(server: serving.Server) -> Iterator[None]:
    """The server's record, as `drag serve` writes it, so that `drag ask` finds it."""
    tokens.record_state(server.url, server.loaded(), server.settings_key)
    try:
        yield
    finally:
        tokens.state_file().unlink(missing_ok=True)


def test_drag_ask_is_answered_by_a_running_server(echo_env: SocketLog) -> None:
    with serving_to(echo_env) as server, recorded(server):
        assert "student" not in server.loaded()
        done = CliRunner().invoke(cli, ["ask", "--json", "--mode", "none", "What is 2+2?"])
        assert done.exit_code == 0, done.output
        record = json.loads(done.stdout)
        assert record["answer"].strip() and record["source"] == "none"
        assert "student" in server.loaded()  # the server's student wrote it
        assert len(server.session.store.questions()) == 1  # once: not again in-process


def test_drag_ask_through_a_server_loads_no_model_store_or_pipeline(echo_env: SocketLog) -> None:
    """The thin client's first byte waits on no import of the in-process path."""
    with serving_to(echo_env) as server, recorded(server):
        same = str(config.load().teacher.max_retries)  # the server's settings, not drag()'s
        env = {"PYTHONPROFILEIMPORTTIME": "1", "DRAG_TEACHER_MAX_RETRIES": same}
        done = drag("ask", "--json", "--mode", "none", "What is 2+2?", env=env)
        assert done.returncode == 0, done.stderr.decode()[-2000:]
        assert "student" in server.loaded()  # the server answered it
        assert len(server.session.store.questions()) == 1  # and only the server
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.decode().splitlines()}
    assert "assistant.serve.client" in imported
    heavy = (
        "assistant.core.pipeline", "assistant.core.session", "assistant.store",
        "assistant.models", "assistant.privacy", "llama_cpp", "numpy", "onnxruntime", "spacy",
    )  # fmt: skip
    loaded = sorted(m for m in imported if m.startswith(heavy))
    assert not loaded, loaded


def test_drag_ask_works_in_process_when_its_settings_differ(
    echo_env: SocketLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serving_to(echo_env) as server, recorded(server):
        monkeypatch.setenv("DRAG_STUDENT_MAX_TOKENS", "17")  # not what the server runs with
        done = CliRunner().invoke(cli, ["ask", "--json", "--mode", "none", "What is 2+2?"])
        assert done.exit_code == 0, done.output
        assert json.loads(done.stdout)["answer"].strip()
        assert "student" not in server.loaded()


def test_a_question_that_needs_a_review_is_asked_in_this_terminal(
    echo_env: SocketLog, curious: hostile_teacher.HostileTeacher, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server does not decide a review: the question is worked here, where the review
    is asked (with no terminal to ask on, it is not sent, as without a server)."""
    monkeypatch.setenv("DRAG_PRIVACY_REVIEW", "on-detection")
    with serving_to(echo_env) as server, recorded(server):
        before = len(curious.seen)
        done = CliRunner().invoke(cli, ["ask", "--mode", "evidence", note_for(NAME, MAIL)])
        assert isinstance(done.exception, PrivacyError)
        assert "no terminal to ask on" in str(done.exception)
        assert len(curious.seen) == before
        assert "detector" in server.loaded()  # the server read it, then left it to us


def test_a_review_the_server_needs_is_shown_in_the_clients_terminal_then_that_text_sent(
    echo_env: SocketLog, curious: hostile_teacher.HostileTeacher, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a terminal, the server tells what the review shows and sends nothing; the
    client shows it and asks again with the user's approval of exactly that text.  No:
    nothing sent, nothing saved.  An approval of another text is asked again, not sent."""
    from assistant.base.errors import Declined
    from assistant.serve import client, wire

    monkeypatch.setenv("DRAG_PRIVACY_REVIEW", "on-detection")
    shown: list[wire.Shown] = []

    def declines(what: wire.Shown) -> bool:
        shown.append(what)
        return False

    def approves(what: wire.Shown) -> bool:
        shown.append(what)
        return True

    question, mode = note_for(NAME, MAIL), {"pipeline.mode": "evidence"}
    with serving_to(echo_env) as server, recorded(server):
        settings = config.load()
        before = len(curious.seen)
        with pytest.raises(Declined):
            client.ask(settings, question, mode, yes=False, on_text=None, review=declines)
        assert len(curious.seen) == before and server.session.store.questions() == []
        (first,) = shown
        assert NAME in first.original and NAME not in first.text and "<PERSON_1>" in first.text
        assert first.counts["PERSON"] == 1

        body = {"question": question, "flags": mode, "settings": wire.settings_key(settings)}
        body |= {"can_review": True, "approved": "0" * 64}  # approved: some other text
        url, key = client._server() or ("", "")
        again = client._asked((url, key), body, 120, None)
        assert again == first and len(curious.seen) == before  # asked again, not sent

        done = client.ask(settings, question, mode, yes=False, on_text=None, review=approves)
        assert done is not None and done.source == "teacher"
        assert shown[1] == first and "student" in server.loaded()  # the server answered
        (sent,) = [s.body.decode() for s in curious.seen[before:]]
        assert NAME not in sent and MAIL not in sent and "<PERSON_1>" in sent

        plain = client.ask(  # drag ask --review: shown though nothing was found
            settings, "What is 2+2?", mode, yes=False, on_text=None, review=approves, always=True
        )
        assert plain is not None and shown[2].text == "What is 2+2?"


def test_an_approval_that_is_not_a_digest_is_a_bad_request() -> None:
    from assistant.serve import native

    for approved in ("é" * 64, "0" * 63, "G" * 64, 7):
        with pytest.raises(InputError, match="64 hex digits"):
            native.parse({"question": "q", "approved": approved})
    assert native.parse({"question": "q", "approved": "0" * 64}).approved == "0" * 64


def test_an_approval_is_checked_even_when_the_next_reading_finds_nothing(
    echo_env: SocketLog, curious: hostile_teacher.HostileTeacher, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The user approved the text the first reading gave; the second reading (at the
    request that carries the approval) finds nothing, here simulated by a fake reading:
    the review policy alone would not ask again, but the approval does not match, so
    the review is shown again and nothing leaves."""
    import dataclasses

    from assistant.base.errors import Declined
    from assistant.serve import client, wire

    monkeypatch.setenv("DRAG_PRIVACY_REVIEW", "on-detection")
    shown: list[wire.Shown] = []

    def approves_once(what: wire.Shown) -> bool:
        shown.append(what)
        return len(shown) == 1

    question = note_for(NAME, MAIL)
    with serving_to(echo_env) as server, recorded(server):
        real = server.session.sanitize

        def reads_nothing_after_the_first(text: str, read: Any = None, **kw: Any) -> Any:
            found = real(text, read, **kw)
            if not shown:
                return found
            empty = dataclasses.replace(found.redacted, text=text, replacements=())
            return dataclasses.replace(found, text=text, findings=(), redacted=empty)

        monkeypatch.setattr(server.session, "sanitize", reads_nothing_after_the_first)
        before = len(curious.seen)
        with pytest.raises(Declined):
            client.ask(
                config.load(), question, {"pipeline.mode": "evidence"}, yes=False,
                on_text=None, review=approves_once,
            )  # fmt: skip
        assert len(shown) == 2 and shown[1].text == question  # asked again, as it would go
        assert len(curious.seen) == before


def test_drag_chat_asks_a_running_server_and_its_placeholders_keep_their_meaning(
    echo_env: SocketLog, curious: hostile_teacher.HostileTeacher, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each line goes to the server with the conversation so far: the second turn's
    name keeps the placeholder the first turn gave it (a fresh one would be <PERSON_1>)."""
    from assistant.serve import native

    monkeypatch.setenv("DRAG_TEACHER_ENDPOINT", curious.url("evidence"))  # hostile evidence
    answered: list[int | None] = []
    real = native.answer

    def counted(runtime: Session, call: native.AskCall, emit: Any, *more: Any) -> Any:
        answered.append(call.conversation)
        return real(runtime, call, emit, *more)

    monkeypatch.setattr(native, "answer", counted)
    lines = f"Is {OTHER_NAME} a friend of {NAME}?\nWhere does {NAME} work?\n"
    before = len(curious.seen)
    with serving_to(echo_env) as server, recorded(server):
        done = CliRunner().invoke(cli, ["chat", "--mode", "evidence", "--no-cache"], input=lines)
        assert done.exit_code == 0, done.output
        asked = server.session.store.questions()
    (first, second) = asked
    assert answered == [None, first["conversation_id"]]  # both by the server, one conversation
    assert second["conversation_id"] == first["conversation_id"]
    sent = [s.body.decode() for s in curious.seen[before:]]
    assert sent and not any(NAME in body or OTHER_NAME in body for body in sent)
    assert any("Is <PERSON_1> a friend of <PERSON_2>?" in body for body in sent)
    assert any("Where does <PERSON_2> work?" in body for body in sent)


def test_a_chat_that_goes_between_the_server_and_this_process_keeps_its_placeholders(
    echo_env: SocketLog, curious: hostile_teacher.HostileTeacher, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Turns 2 and 4 are worked here (the server says they need a review, as it would for
    one), turns 1 and 3 by the server: each side goes on from the history as the other
    left it, so no placeholder is given twice and none changes its meaning."""
    from assistant.serve import native

    monkeypatch.setenv("DRAG_TEACHER_ENDPOINT", curious.url("evidence"))
    real = native.answer
    turns: list[str] = []

    def alternate(runtime: Session, call: native.AskCall, emit: Any, *more: Any) -> Any:
        turns.append(call.question)
        if len(turns) % 2 == 0:
            emit({"error": {"kind": "review", "message": "this question needs your review"}})
            return None
        return real(runtime, call, emit, *more)

    monkeypatch.setattr(native, "answer", alternate)
    names = ["Charlotte Brennan", "William Ashworth", "Eleanor Whitcombe"]
    lines = (
        f"Is {OTHER_NAME} a friend of {NAME}?\n"  # server: <PERSON_1>, <PERSON_2>
        f"Does {names[0]} know {NAME}?\n"  # here: <PERSON_3>, <PERSON_2>
        f"Did {names[1]} meet {names[2]}?\n"  # server: <PERSON_4>, <PERSON_5>
        f"Is {names[2]} older than {names[0]}?\n"  # here: <PERSON_5>, <PERSON_3>
    )
    before = len(curious.seen)
    with serving_to(echo_env) as server, recorded(server):
        done = CliRunner().invoke(cli, ["chat", "--mode", "evidence", "--no-cache"], input=lines)
        assert done.exit_code == 0, done.output
        asked = server.session.store.questions()
    assert len(turns) == 4 and len(asked) == 4
    assert len({q["conversation_id"] for q in asked}) == 1
    sent = "\n".join(s.body.decode() for s in curious.seen[before:])
    for said in (
        "Is <PERSON_1> a friend of <PERSON_2>?",
        "Does <PERSON_3> know <PERSON_2>?",
        "Did <PERSON_4> meet <PERSON_5>?",
        "Is <PERSON_5> older than <PERSON_3>?",
    ):
        assert said in sent, said


def test_drag_ask_works_in_process_when_no_server_answers(echo_env: SocketLog) -> None:
    with serving_to(echo_env) as server:
        url = server.url
    tokens.record_state(url, [])  # a record left by a server that is gone
    try:
        done = CliRunner().invoke(cli, ["ask", "--json", "--mode", "none", "What is 2+2?"])
    finally:
        tokens.state_file().unlink(missing_ok=True)
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["answer"].strip()


def test_the_published_first_byte_figures_are_the_stored_ones() -> None:
    root = Path(__file__).parents[1]
    stored = json.loads((root / "docs/results/serve-first-byte/first-byte.json").read_text())
    text = (root / "docs/benchmarks.md").read_text("utf-8")
    cold, warm = stored["cold"], stored["through_serve"]
    assert f"| a cold process | {cold['p50']:.2f} s | {cold['p95']:.2f} s |" in text
    assert f"| through `drag serve` | {warm['p50']:.2f} s | {warm['p95']:.2f} s |" in text
    alone = stored["server_alone"]
    assert f"in the bench's process) | {alone['p50']:.2f} s | {alone['p95']:.2f} s |" in text
    prompt = stored["student_prompt"]
    assert f"reading the prompt | {prompt['p50']:.2f} s | {prompt['p95']:.2f} s |" in text
    flat = " ".join(text.split())
    assert f"Its prompt is {statistics.median(prompt['tokens']):g} tokens" in flat
    assert stored["runs"] == len(warm["all"]) == len(cold["all"]) == len(alone["all"]) == 10
    assert f"{cold['p50'] / warm['p50']:.1f}× sooner at the median" in text
    assert warm["p50"] > stored["target_p50_s"] and "(≤ 1 s) is **not met**" in text
    # The server's own part (its first byte less its student's prompt), before and after
    # the cache's statements were ranked from their stored embeddings.
    before = json.loads(
        (root / "docs/results/serve-first-byte/before-stored-vectors/first-byte.json").read_text()
    )
    own = [
        statistics.median(
            a - b for a, b in zip(d["server_alone"]["all"], d["student_prompt"]["all"], strict=True)
        )
        for d in (before, stored)
    ]
    assert f"The server's own part around it is {own[1]:.2f} s at the median" in flat
    assert f"It was {own[0]:.2f} s in a run" in flat
    split = (root / "docs/results/serve-first-byte/prompt-tokens/output.txt").read_text()
    assert "system prompt tokens 63" in split and "median 64.5" in split
    rest = statistics.median(t - 63 for t in prompt["tokens"])
    assert "63 of them the system prompt" in flat and f"own text is {rest:g} tokens" in flat
    rates = [(t - 63) / x for t, x in zip(prompt["tokens"], prompt["all"], strict=True)]
    assert round(statistics.median(rates), -1) == 60 and "about 60 of them a second" in flat


def test_a_question_the_server_took_is_never_worked_again_here(
    echo_env: SocketLog, curious: hostile_teacher.HostileTeacher, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The teacher answered and the server's ledger could not record it: the error comes
    back as this process's own (the reply kept), and nothing is sent a second time."""
    from assistant.base.errors import StoreError

    with serving_to(echo_env) as server, recorded(server):
        monkeypatch.setattr(server.session.store, "record_upload", disk_full)
        before = len(curious.seen)
        done = CliRunner().invoke(cli, ["ask", "--mode", "evidence", "--yes", "What is 2+2?"])
        assert isinstance(done.exception, StoreError), done.output
        assert "could not be written to the ledger" in str(done.exception)
        assert len(curious.seen) == before + 1  # asked once, by the server


def test_ctrl_c_in_drag_ask_stops_the_servers_student_as_it_would_here(
    echo_env: SocketLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client goes (Ctrl+C) once the answer has begun: the server's student stops,
    nothing is saved as answered (the client keeps the question as a draft), and the
    next question is answered."""
    from assistant.serve import client

    pieces: list[str] = []

    def stop(piece: str) -> None:
        pieces.append(piece)
        raise KeyboardInterrupt

    question = "Write a long story about a cat who sails around the world."
    monkeypatch.setenv("DRAG_STUDENT_MAX_TOKENS", "64")  # a student not stopped ends too
    with serving_to(echo_env) as server, recorded(server):
        settings = config.load()
        with pytest.raises(KeyboardInterrupt):
            client.ask(settings, question, {"pipeline.mode": "none"}, yes=True, on_text=stop)
        assert len(pieces) == 1
        deadline = time.monotonic() + 120  # the server's request ends
        while server.busy() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.busy() == 0 and server.session.store.questions() == []
        done = client.ask(
            settings, "What is 2+2?", {"pipeline.mode": "none"}, yes=True, on_text=None
        )
        assert done is not None and done.answer.strip()
        assert len(server.session.store.questions()) == 1


def test_a_chat_client_gone_mid_answer_stops_the_servers_student(
    echo_env: SocketLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Model "drag" through the chat API, streamed: a client that goes once the answer
    has begun stops the student (the models are shared: the others would wait for an
    answer written for no one), nothing is saved as answered, and the next request works."""
    monkeypatch.setenv("DRAG_PIPELINE_MODE", "none")
    monkeypatch.setenv("DRAG_STUDENT_MAX_TOKENS", "64")  # a student not stopped ends too
    question = "Write a long story about a cat who sails around the world."
    with serving_to(echo_env) as server:
        gone = http.client.HTTPConnection("127.0.0.1", int(server.server_address[1]), timeout=120)
        body = {"model": "drag", "messages": [{"role": "user", "content": question}]}
        headers = {
            "Authorization": f"Bearer {tokens.token_for(tokens.DEFAULT)}",
            "Content-Type": "application/json",
        }
        gone.request("POST", "/v1/chat/completions", json.dumps({**body, "stream": True}), headers)
        response = gone.getresponse()
        assert response.status == 200 and response.readline().startswith(b"data: ")
        response.close()  # the answer has begun: the client goes
        gone.close()
        ended(server)
        assert server.session.store.questions() == []
        reply = client_of(server).chat.completions.create(
            model="drag", messages=[{"role": "user", "content": "What is 2+2?"}]
        )
        assert (reply.choices[0].message.content or "").strip()
        ended(server)  # the answer is told before it is saved
        assert len(server.session.store.questions()) == 1


def test_a_chat_client_gone_while_its_answer_is_written_whole_stops_the_student(
    echo_env: SocketLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Model "drag", not streamed: nothing is told before the end, yet a client that
    goes while the student writes stops it as a streamed one does."""
    monkeypatch.setenv("DRAG_PIPELINE_MODE", "none")
    monkeypatch.setenv("DRAG_STUDENT_MAX_TOKENS", "64")  # a student not stopped ends too
    question = "Write a long story about a cat who sails around the world."
    with serving_to(echo_env) as server:
        writing = threading.Event()
        real = server.session.student.chat

        def chat(*args: Any, on_text: Any = None, **kw: Any) -> Any:
            def told(piece: str) -> None:
                writing.set()  # the student has begun: the client may go now
                if on_text is not None:
                    on_text(piece)

            return real(*args, on_text=told, **kw)

        monkeypatch.setattr(server.session.student, "chat", chat)
        gone = http.client.HTTPConnection("127.0.0.1", int(server.server_address[1]), timeout=120)
        headers = {
            "Authorization": f"Bearer {tokens.token_for(tokens.DEFAULT)}",
            "Content-Type": "application/json",
        }
        body = {"model": "drag", "messages": [{"role": "user", "content": question}]}
        gone.request("POST", "/v1/chat/completions", json.dumps(body), headers)
        assert writing.wait(120)
        gone.close()
        ended(server)
        assert server.session.store.questions() == []


def ended(server: serving.Server) -> None:
    """Return once the server's requests have ended (a poll, with a deadline)."""
    deadline = time.monotonic() + 120
    while server.busy():
        assert time.monotonic() < deadline, "a request never ended"
        time.sleep(0.05)


def test_a_request_that_takes_the_models_after_the_stop_is_refused(
    echo_env: SocketLog, curious: hostile_teacher.HostileTeacher
) -> None:
    """Once the server is closing, a request that gets the models does not start:
    `drag ask` through it fails with its reason, a program gets 503, and nothing
    reaches the teacher."""
    from assistant.base.errors import DragError
    from assistant.serve import client

    with serving_to(echo_env) as server, recorded(server):
        before = len(curious.seen)
        server.closing.set()
        settings = config.load()
        with pytest.raises(DragError, match="drag serve is stopping; nothing was sent"):
            client.ask(settings, "What is 2+2?", {"pipeline.mode": "none"}, yes=True, on_text=None)
        with pytest.raises(openai.InternalServerError, match="drag serve is stopping"):
            client_of(server).chat.completions.create(
                model="hostile", messages=[{"role": "user", "content": "What is 2+2?"}]
            )
        assert server.session.store.questions() == [] and len(curious.seen) == before


def started_waiting(asking: threading.Thread, server: serving.Server) -> None:
    """Start ``asking`` (a request) and return once it waits for the models that the
    caller holds (a poll of the server's count, with a deadline)."""
    asking.start()
    deadline = time.monotonic() + 60
    while server.busy() < 1:
        assert time.monotonic() < deadline, "the request never arrived"
        time.sleep(0.05)


def test_drag_ask_waiting_for_the_models_is_told_at_once_when_the_server_stops(
    echo_env: SocketLog, curious: hostile_teacher.HostileTeacher
) -> None:
    """`drag ask` through the server waits behind the request under way; the server
    stops: the question fails at once with the reason (not a cut connection, nor "the
    server may still finish it"), while the other request still holds the models, and
    nothing of it reaches the teacher."""
    from assistant.base.errors import DragError
    from assistant.serve import client

    failed: list[BaseException] = []

    def ask() -> None:
        try:
            client.ask(
                config.load(), "What is 2+2?", {"pipeline.mode": "none"}, yes=True, on_text=None
            )
        except DragError as exc:
            failed.append(exc)

    with serving_to(echo_env) as server, recorded(server):
        before = len(curious.seen)
        asking = threading.Thread(target=ask)
        with server.work:  # the request under way
            started_waiting(asking, server)
            server.closing.set()
            asking.join(timeout=60)
            assert not asking.is_alive(), "the waiting question was not told while stopping"
        assert len(failed) == 1 and "drag serve is stopping; nothing was sent" in str(failed[0])
        assert len(curious.seen) == before


def test_a_request_waiting_when_the_ledger_fails_is_not_sent(
    echo_env: SocketLog, curious: hostile_teacher.HostileTeacher
) -> None:
    """The ledger failed (nothing more is sent) while a request waited for the models:
    it does not start once it has them; it gets the reason (503), and nothing of it
    reaches the teacher."""
    answered: list[BaseException] = []

    def ask() -> None:
        try:
            client_of(server).chat.completions.create(
                model="hostile", messages=[{"role": "user", "content": "What is 2+2?"}]
            )
        except openai.OpenAIError as exc:
            answered.append(exc)

    with serving_to(echo_env) as server:
        before = len(curious.seen)
        asking = threading.Thread(target=ask)
        with server.work:  # the request under way
            started_waiting(asking, server)
            server.stopped = "drag serve sends nothing more: the ledger failed"
        asking.join(timeout=120)
        assert len(answered) == 1 and isinstance(answered[0], openai.InternalServerError)
        assert "the ledger failed" in str(answered[0]) and len(curious.seen) == before


def test_a_client_gone_before_anything_was_sent_has_nothing_sent(
    echo_env: SocketLog, curious: hostile_teacher.HostileTeacher, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`drag ask` through the server, Ctrl+C while the question is still being checked:
    as in-process, nothing leaves (the server looks before the upload), and the next
    question is answered."""
    from assistant.serve import client, wire

    reached, release = threading.Event(), threading.Event()
    with serving_to(echo_env) as server, recorded(server):
        real = server.session.sanitize

        def slow(text: str, read: Any = None, **kw: Any) -> Any:  # the reader at work
            reached.set()
            release.wait(120)
            return real(text, read, **kw)

        monkeypatch.setattr(server.session, "sanitize", slow)
        settings = config.load()
        body = {
            "question": "What is the capital of France?",
            "flags": {"pipeline.mode": "evidence"},
            "yes": True,
            "settings": wire.settings_key(settings),
        }
        gone = http.client.HTTPConnection("127.0.0.1", int(server.server_address[1]), timeout=60)
        headers = {"Authorization": f"Bearer {tokens.cli_token()}"}
        gone.request("POST", wire.PATH, body=json.dumps(body), headers=headers)
        assert reached.wait(120)
        gone.close()
        before = len(curious.seen)
        release.set()
        deadline = time.monotonic() + 120  # the server's request ends
        while server.busy() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.busy() == 0
        assert len(curious.seen) == before and ledger_rows() == [] and journal_notes() == 0
        mode = {"pipeline.mode": "evidence"}
        done = client.ask(settings, "What is 2+2?", mode, yes=True, on_text=None)
        assert done is not None and done.source == "teacher" and len(curious.seen) == before + 1


def test_a_client_is_gone_only_once_it_closed_its_end() -> None:
    """A client that waits, or that sent its next request on the same connection (HTTP
    keep-alive), is there; one that closed its end is gone."""
    import socket

    from assistant.net.loopback import peer_closed

    server, client = socket.socketpair()
    with server, client:
        assert peer_closed(server) is False  # waiting
        client.sendall(b"POST /v1/chat/completions HTTP/1.1\r\n")
        assert peer_closed(server) is False  # its next request, not an end
        assert server.recv(64)  # read: nothing waits now
        client.close()
        assert peer_closed(server) is True


@pytest.mark.parametrize("model", ["hostile", "drag"])
def test_a_chat_client_gone_while_it_waited_has_nothing_sent(
    echo_env: SocketLog,
    curious: hostile_teacher.HostileTeacher,
    monkeypatch: pytest.MonkeyPatch,
    model: str,
) -> None:
    """A program's chat request waits for the models (another request holds them), and
    the program gives up: once its turn comes nothing is sent for it, forwarded or asked
    through the pipeline; the next request is answered."""
    monkeypatch.setenv("DRAG_PIPELINE_MODE", "evidence")
    question = [{"role": "user", "content": "What is the capital of France?"}]
    with serving_to(echo_env) as server:
        before = len(curious.seen)
        server.work.acquire()  # a request under way
        gone = http.client.HTTPConnection("127.0.0.1", int(server.server_address[1]), timeout=60)
        headers = {
            "Authorization": f"Bearer {tokens.token_for(tokens.DEFAULT)}",
            "Content-Type": "application/json",
        }
        gone.request(
            "POST",
            "/v1/chat/completions",
            json.dumps({"model": model, "messages": question}),
            headers,
        )
        deadline = time.monotonic() + 60
        while server.busy() < 1:
            assert time.monotonic() < deadline, "the request never arrived"
            time.sleep(0.05)
        gone.close()  # it gave up
        server.work.release()
        ended(server)
        assert len(curious.seen) == before and ledger_rows() == [] and journal_notes() == 0
        reply = client_of(server).chat.completions.create(model=model, messages=question)
        assert (reply.choices[0].message.content or "").strip()
        assert len(curious.seen) == before + 1


@pytest.mark.parametrize("holder", ["the recorded pid", "another process"])
def test_a_port_that_is_not_a_drag_server_is_never_given_the_question(
    echo_env: SocketLog, holder: str
) -> None:
    """Something else on the recorded port (an SSH-like banner): answered in-process.
    Held by another process than the recorded one (the server died, its port was
    taken), it is not even connected to."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    echo_env.allowed.add(("127.0.0.1", port))

    def banner() -> None:
        with contextlib.suppress(OSError):
            conn, _ = listener.accept()
            with conn:
                conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")
                conn.recv(65536)

    threading.Thread(target=banner, daemon=True).start()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    pid = os.getpid() if holder == "the recorded pid" else other.pid
    tokens._replace(
        tokens.state_file(), json.dumps({"pid": pid, "url": f"http://127.0.0.1:{port}/v1"})
    )
    try:
        done = CliRunner().invoke(cli, ["ask", "--json", "--mode", "none", "What is 2+2?"])
    finally:
        tokens.state_file().unlink(missing_ok=True)
        listener.close()
        other.kill()
        other.wait()
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["answer"].strip()  # answered here
    assert (("127.0.0.1", port) in echo_env.seen) is (holder == "the recorded pid")


def test_a_program_key_cannot_use_the_cli_route(echo_env: SocketLog) -> None:
    """`drag ask --yes` skips the review; a program given a key must not."""
    body = json.dumps(
        {"question": note_for(NAME, MAIL), "yes": True, "settings": "", "flags": {}}
    ).encode()
    with serving_to(echo_env) as server:
        for name, want in ((tokens.DEFAULT, 403), ("editor", 403)):
            auth = {"Authorization": f"Bearer {tokens.token_for(name)}", "Host": "localhost"}
            status, error = raw(
                server, "POST", "/drag/ask", {**auth, "Content-Length": str(len(body))}, body
            )
            assert status == want and error["error"]["code"] == "cli_only"
        auth = {"Authorization": f"Bearer {tokens.cli_token()}", "Host": "localhost"}
        status, error = raw(
            server, "POST", "/drag/ask", {**auth, "Content-Length": str(len(body))}, body
        )
        assert status == 409 and error["error"]["code"] == "settings"  # its own key: checked


@pytest.mark.parametrize(
    "record",
    [
        {"pid": 1, "url": "http://127.0.0.1:99999/v1"},
        {"pid": 10**30, "url": "http://127.0.0.1:8778/v1"},
        {"pid": 1, "url": "http://[::1/v1"},
    ],
    ids=["port-past-65535", "huge-pid", "broken-address"],
)
def test_a_damaged_server_record_is_no_server(record: dict[str, Any]) -> None:
    """A record no drag serve wrote (damaged, edited): `drag serve --status` says none
    runs (it was an internal error, and `drag ask` failed with its question not kept)."""
    tokens.state_file().parent.mkdir(parents=True, exist_ok=True)
    tokens.state_file().write_text(json.dumps(record), "utf-8")
    assert tokens.recorded() is None
    done = CliRunner().invoke(cli, ["serve", "--status"])
    assert done.exit_code == 1 and "no drag serve is running" in done.output  # none runs
