"""How `drag serve`'s stop waits (assistant/serve/stopping.py): pure logic, with a
plain lock, event and count (the subprocess tests in test_serve.py stop a real one)."""

from __future__ import annotations

import threading
import time

import pytest

from assistant.serve import stopping


def test_a_request_waiting_for_the_models_stops_waiting_once_the_server_closes() -> None:
    work, closing = threading.Lock(), threading.Event()
    assert stopping.take_turn(work, closing) and work.locked()  # free: taken
    result: list[bool] = []
    waiter = threading.Thread(
        target=lambda: result.append(stopping.take_turn(work, closing)), daemon=True
    )
    waiter.start()
    closing.set()  # the models still held by the request under way
    waiter.join(timeout=30)
    assert result == [False] and work.locked()  # it gave up without them


def test_the_stop_waits_until_each_waiting_request_was_told() -> None:
    left = [3]

    def waiting() -> int:  # one is told each time the stop looks
        left[0] -= 1
        return left[0]

    assert stopping.told(waiting, threading.Event()) and left[0] == 0


def test_the_stop_waits_for_the_told_only_so_long(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stopping, "TELL", 0.3)
    started = time.monotonic()
    assert not stopping.told(lambda: 1, threading.Event())
    assert time.monotonic() - started >= 0.3


def test_another_signal_ends_the_wait_for_the_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stopping, "TELL", 3600.0)  # only the signal can end it
    looks = [0]

    def waiting() -> int:
        looks[0] += 1
        assert looks[0] < 20, "the stop kept waiting after another signal"
        return 2

    hurry = threading.Event()
    hurry.set()
    assert not stopping.told(waiting, hurry, until=1)
    assert stopping.told(lambda: 1, hurry, until=1)  # the one under way is not waited for
