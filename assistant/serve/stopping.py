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
from collections.abc import Callable, Iterator
from types import FrameType

from assistant.base import signals

WAIT = 60.0  # seconds the stop gives the request under way
TELL = 5.0  # seconds the stop gives the requests still waiting to be told they do not start
POLL = 0.2  # seconds between looks at a stop while waiting for the models


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
    request still waiting for it never starts on models being closed; it stops waiting
    once the server is closing, :func:`take_turn`, and so does one that takes ``work``
    first: Server.refusal)."""
    deadline = time.monotonic() + WAIT
    while not hurry.is_set() and time.monotonic() < deadline:
        if work.acquire(timeout=POLL):
            return True
    return False


def take_turn(work: threading.Lock, closing: threading.Event) -> bool:
    """Wait for ``work`` (the models, which the request under way holds) until the server
    is closing: True with ``work`` held; False, not held, once ``closing`` is set (the
    request is then refused at once, with its reason, rather than waiting to end with
    the process)."""
    while not work.acquire(timeout=POLL):
        if closing.is_set():
            return False
    return True


def told(waiting: Callable[[], int], hurry: threading.Event, until: int = 0) -> bool:
    """Whether the requests still waiting when the server stopped were told so (their
    count, ``waiting()``, down to ``until``) within :data:`TELL` seconds, before
    ``hurry``: each stops waiting within :data:`POLL` and writes its refusal."""
    deadline = time.monotonic() + TELL
    while waiting() > until:
        if hurry.is_set() or time.monotonic() >= deadline:
            return False
        time.sleep(POLL / 4)
    return True
