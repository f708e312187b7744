"""How `drag serve` stops: on a signal, after the request under way, never cut short.

The first SIGTERM or SIGINT stops the server; the stop waits up to a minute for the
request under way (its ledger row and history are written whole), and a later signal
ends that wait.  No signal can cut the stop itself short: the handler never raises (an
exception raised wherever the main thread happens to be can land inside any library's
code); it only asks, and a thread of its own stops the server's loop.  A second signal
that comes while the first is handled (a supervisor and a terminal sending theirs
together) only hurries the stop, and once the stop has begun no signal ends the process
before it has ended its work.
"""

from __future__ import annotations

import contextlib
import os
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
    SIGINT): the first writes to :attr:`asked` (a pipe: the thread
    :func:`stopped_by_signals` starts reads it, then stops the server's loop), each later
    one only sets :attr:`hurry`.  It never raises, and takes no lock the main thread may
    hold (the main thread only reads ``hurry``)."""

    def __init__(self) -> None:
        self.hurry = threading.Event()
        self.stopping = False
        self.wake, self.asked = os.pipe()  # read end, write end

    def __call__(self, _signum: int, _frame: FrameType | None) -> None:
        if self.stopping:
            self.hurry.set()
            return
        self.stopping = True
        os.write(self.asked, b"s")


@contextlib.contextmanager
def stopped_by_signals(stop: Callable[[], None]) -> Iterator[Stops]:
    """SIGTERM and SIGINT handled by a :class:`Stops` within the block; ``stop`` (the
    server's ``shutdown``, which waits for its loop to end) is called in a thread of its
    own at the first.  After a stop the two signals are ignored (the process is ending:
    a late one would end it before its own end, as Python lets go of its handlers while
    it exits); without one, the handlers before are put back."""
    stops = Stops()

    def stopper() -> None:
        try:
            asked = os.read(stops.wake, 1)
        finally:
            os.close(stops.wake)
        if asked == b"s":
            stop()

    before = signals.stop_on(stops)
    threading.Thread(target=stopper, name="drag-serve-stop", daemon=True).start()
    try:
        yield stops
    finally:
        for s, handler in before.items():
            signal.signal(s, signal.SIG_IGN if stops.stopping else handler)
        if not stops.stopping:
            os.write(stops.asked, b"e")  # the stopper ends
        os.close(stops.asked)


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
