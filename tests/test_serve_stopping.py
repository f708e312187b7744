"""How `drag serve`'s stop waits (assistant/serve/stopping.py): pure logic, with a
plain lock, event and count (the subprocess tests in test_serve.py stop a real one),
and its signal handler in a process of its own."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from assistant.serve import stopping


class FakeClosing(threading.Event):
    """The server's closing flag, which says when a waiting request first looked at it
    (it had waited for the models one poll)."""

    def __init__(self) -> None:
        super().__init__()
        self.looked = threading.Event()

    def is_set(self) -> bool:
        self.looked.set()
        return super().is_set()


def test_a_request_waits_for_the_models_until_the_server_closes() -> None:
    work, closing = threading.Lock(), FakeClosing()
    assert stopping.take_turn(work, closing) and work.locked()  # free: taken

    def waiter(into: list[bool]) -> threading.Thread:
        closing.looked.clear()
        thread = threading.Thread(
            target=lambda: into.append(stopping.take_turn(work, closing)), daemon=True
        )
        thread.start()
        assert closing.looked.wait(30), "the request never waited"
        return thread

    first: list[bool] = []
    one = waiter(first)
    work.release()  # the request under way ends: the waiting one gets the models
    one.join(timeout=30)
    assert first == [True] and work.locked()
    second: list[bool] = []
    two = waiter(second)
    closing.set()  # the models still held by the first
    two.join(timeout=30)
    assert second == [False] and work.locked()  # it gave up without them


def test_the_stop_waits_until_each_waiting_request_was_told() -> None:
    left = [3]

    def waiting() -> int:  # one is told each time the stop looks
        left[0] -= 1
        return left[0]

    assert stopping.told(waiting, stopping.Flag()) and left[0] == 0


def test_the_stop_waits_for_the_told_only_so_long(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stopping, "TELL", 0.3)
    started = time.monotonic()
    assert not stopping.told(lambda: 1, stopping.Flag())
    assert time.monotonic() - started >= 0.3


def test_another_signal_ends_the_wait_for_the_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stopping, "TELL", 3600.0)  # only the signal can end it
    looks = [0]

    def waiting() -> int:
        looks[0] += 1
        assert looks[0] < 20, "the stop kept waiting after another signal"
        return 2

    hurry = stopping.Flag()
    hurry.set()
    assert not stopping.told(waiting, hurry, until=1)
    assert stopping.told(lambda: 1, hurry, until=1)  # the one under way is not waited for


# Signals sent to itself: the first asks for the stop, then, while a later one is being
# handled, another arrives at each function call its handler makes (at most 20), as
# signals coming fast may; each waits for nothing.  A handler that takes a lock (an
# Event's set) waits there for ever on the lock its own thread holds.
_NESTED = """
import faulthandler, os, signal, sys, threading
from assistant.serve import stopping
faulthandler.dump_traceback_later(20, exit=True)
asked = threading.Event()
with stopping.stopped_by_signals(asked.set) as stops:
    os.kill(os.getpid(), signal.SIGTERM)
    assert asked.wait(20), "the stop was not asked"
    sent = [0]
    def nest(frame, event, arg):
        if event == "call" and sent[0] < 20:
            sent[0] += 1
            os.kill(os.getpid(), signal.SIGINT)
    sys.settrace(nest)
    os.kill(os.getpid(), signal.SIGINT)
    sys.settrace(None)
    print("hurried" if stops.hurry.is_set() else "not hurried", sent[0], flush=True)
"""


def test_a_signal_that_comes_while_another_is_handled_never_waits() -> None:
    """A handler runs inside another one (in the main thread, at the other's next call):
    the later signals only set a flag, without a lock, and the stop goes on."""
    done = subprocess.run(
        [sys.executable, "-c", _NESTED], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-4000:]
    said = done.stdout.split()
    assert said[0] == "hurried" and int(said[1]) >= 2, done.stdout  # one came inside
