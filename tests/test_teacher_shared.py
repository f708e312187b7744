"""The local teacher is one llama.cpp server that every drag process shares (issue 28):
a request from one of them waits for the reply being written, and never cuts it short.
llama_cpp.server, by default, ends a streamed reply early when another request comes in
(``interrupt_requests``): `drag serve` forwarding a tool's streamed chat would have seen
its reply end unfinished whenever a question of the app went to the same teacher.  The
server is the real one, started as the product starts it (LocalServer)."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import openai
import pytest

from assistant.models import localserver
from assistant.models.localserver import ALIAS
from tests.conftest import TEACHER_KEY

pytestmark = pytest.mark.integration

LONG = 200  # tokens: the streamed reply goes on well past the other request's arrival


def _eos(model_path: Any) -> int:
    from llama_cpp import Llama

    vocab = Llama(model_path=str(model_path), vocab_only=True, verbose=False)
    try:
        return int(vocab.token_eos())
    finally:
        vocab.close()


COUNT: list[Any] = [{"role": "user", "content": "Count from 1 to 1000, one number a line."}]


def _long_stream(client: openai.OpenAI, model_path: Any, max_tokens: int) -> Any:
    """A streamed reply that writes all ``max_tokens`` (its end token barred)."""
    return client.chat.completions.create(
        model=ALIAS,
        messages=COUNT,
        max_tokens=max_tokens,
        temperature=0.0,
        logit_bias={str(_eos(model_path)): -100},
        stream=True,
    )


def test_another_request_does_not_cut_a_streamed_reply_short(
    on_teacher: dict[str, str], teacher_server: str, test_model_path: Any
) -> None:
    client = openai.OpenAI(base_url=teacher_server, api_key=TEACHER_KEY, max_retries=0)
    stream = _long_stream(client, test_model_path, LONG)
    other: list[str | None] = []

    def ask_another() -> None:
        reply = client.chat.completions.create(model=ALIAS, messages=COUNT, max_tokens=4)
        other.append(reply.choices[0].finish_reason)

    asker = threading.Thread(target=ask_another)
    finish: str | None = None
    pieces = 0
    try:
        for chunk in stream:
            if not chunk.choices:
                continue
            if chunk.choices[0].delta.content:
                pieces += 1
                if pieces == 1:  # the reply is being written: another request comes in
                    asker.start()
            finish = chunk.choices[0].finish_reason or finish
    finally:
        stream.close()
        if pieces:  # started
            asker.join(timeout=300)
    assert finish == "length", f"the streamed reply ended after {pieces} pieces, unfinished"
    assert pieces >= LONG // 2
    # And the other request was answered too (it may stop before its 4 tokens).
    assert len(other) == 1 and other[0] is not None


@pytest.fixture
def shared_record(on_teacher: dict[str, str], teacher_process: Any, tmp_path: Path) -> Path:
    """The real test teacher recorded as drag records a server for others to find."""
    record = tmp_path / "teacher.json"
    teacher_process.record(record)
    return record


def test_a_server_writing_a_reply_is_found_up_not_started_again(
    shared_record: Path, teacher_server: str, test_model_path: Any
) -> None:
    """A drag process that looks for the shared server while it writes a reply finds it
    (even the list of its models waits for that reply, past the probe's 2 s): it must not
    take it for gone and start a second server on the same cores."""
    assert localserver._recorded(shared_record, test_model_path) is not None  # idle: answers
    client = openai.OpenAI(base_url=teacher_server, api_key=TEACHER_KEY, max_retries=0)
    stream = _long_stream(client, test_model_path, 4000)  # far longer than the look takes
    found: list[Any] = []
    try:
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:  # it is writing
                found.append(localserver._recorded(shared_record, test_model_path))
                break
    finally:
        stream.close()  # the server stops writing to a client that went
    assert found and found[0] is not None, "the busy server was taken for gone"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_stopped_server_is_not_taken_for_a_busy_one(
    shared_record: Path, teacher_process: Any, test_model_path: Any
) -> None:
    """A server stopped (Ctrl+Z on the terminal of `drag teacher serve` stops it too)
    takes the connection and never answers, as a busy one does, but does no work: it is
    not used (each question would wait for its timeout), as before."""
    pid = teacher_process.process.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        found = localserver._recorded(shared_record, test_model_path)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert found is None
    assert localserver._recorded(shared_record, test_model_path) is not None  # up again
