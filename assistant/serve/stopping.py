"""How `drag serve` stops: on a signal, after the request under way, never cut short.

The first SIGTERM or SIGINT stops the server; the stop waits up to a minute for the
request under way (its ledger row and history are written whole), and a later signal
ends that wait.  No signal can cut the stop itself short: one handler is installed
from the start, so a second signal that comes while the first is handled (a supervisor
and a terminal sending theirs together) only hurries it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from types import FrameType

from assistant.base import signals

WAIT = 60.0  # seconds the stop gives the request under way


class Stops:
    """The handler of SIGTERM and SIGINT (even where a shell started the server ignoring
    SIGINT): the first stops the server (a KeyboardInterrupt where the main thread is),
    each later one only sets :attr:`hurry`."""

    def __init__(self) -> None:
        self.hurry = threading.Event()
        self._stopping = False

    def __call__(self, _signum: int, _frame: FrameType | None) -> None:
        if self._stopping:
            self.hurry.set()
            return
        self._stopping = True
        raise KeyboardInterrupt


@contextlib.contextmanager
def stopped_by_signals() -> Iterator[Stops]:
    stops = Stops()
    before = signals.stop_on(stops)
    try:
        yield stops
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def request_ended(work: threading.Lock, hurry: threading.Event) -> bool:
    """Whether the request under way (the holder of ``work``) ended within :data:`WAIT`
    seconds, before ``hurry`` was set; if so, ``work`` is held (and never let go: a
    request still queued then waits and ends with the process, never starting on models
    being closed; one that takes ``work`` first sees the server closing and does not
    start either: Server.closing)."""
    deadline = time.monotonic() + WAIT
    while not hurry.is_set() and time.monotonic() < deadline:
        if work.acquire(timeout=0.2):
            return True
    return False
