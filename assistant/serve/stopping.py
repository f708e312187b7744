"""How `drag serve` stops: on a signal, after the request under way, never cut short.

The first SIGTERM or SIGINT stops the server; the stop waits up to a minute for the
request under way (its ledger row and history are written whole), and a later signal
ends that wait.  No signal can cut the stop itself short: the handler never raises (an
exception raised wherever the main thread happens to be can land inside any library's
code) and takes no lock (a handler can run inside another, in the same thread); it
only asks, and a thread of its own stops the server's loop.  A second signal that
comes while the first is handled (a supervisor and a terminal sending theirs together)
only hurries the stop.  Once the stop has ended, the process ends at once
(``os._exit``: its work is done, and a signal during the interpreter's own exit would
end it by that signal); a signal before that ends it at once too.
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


class Flag:
    """A flag a signal handler sets: an attribute, no lock (a ``threading.Event`` takes
    one in ``set``, which a handler running inside another handler's ``set`` would wait
    for for ever).  The stop's waits only read it."""

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set


class Stops:
    """The handler of SIGTERM and SIGINT (even where a shell started the server ignoring
    SIGINT): the first asks for the stop (a byte on a pipe: the thread
    :func:`stopped_by_signals` starts reads it, then stops the server's loop); a later
    one, or any once the server is :attr:`stopping` for another reason, sets
    :attr:`hurry`."""

    def __init__(self) -> None:
        self.hurry = Flag()
        self.stopping = False  # a signal asked, or the loop ended (set by the server)
        self.asked = False  # a signal asked
        self.wake, self._ask = os.pipe()  # the stopper reads wake

    def __call__(self, _signum: int, _frame: FrameType | None) -> None:
        if self.stopping:
            self.hurry.set()
            return
        self.stopping = self.asked = True
        os.write(self._ask, b"s")

    def unasked(self) -> None:
        """No signal will ask now: the stopper ends."""
        if not self.asked:
            os.write(self._ask, b"e")
        os.close(self._ask)


def end_now(_signum: int, _frame: FrameType | None) -> None:
    """After the stop: the process ends at once (its work is done)."""
    os._exit(0)


@contextlib.contextmanager
def stopped_by_signals(stop: Callable[[], None]) -> Iterator[Stops]:
    """SIGTERM and SIGINT handled by a :class:`Stops` within the block; ``stop`` (the
    server's ``shutdown``, which waits for its loop to end) is called in a thread of its
    own at the first.  After a stop asked by a signal, each of the two ends the process
    at once (:func:`end_now`): the caller ends it, ``os._exit``, as soon as the block
    ends.  Without one, the handlers before are put back."""
    stops = Stops()

    def stopper() -> None:
        try:
            asked = os.read(stops.wake, 1)
        finally:
            os.close(stops.wake)
        if asked == b"s":
            stop()

    try:
        threading.Thread(target=stopper, name="drag-serve-stop", daemon=True).start()
    except BaseException:
        os.close(stops.wake)
        os.close(stops._ask)
        raise
    before: dict[signal.Signals, signals.Handler] = {}
    try:
        before = signals.stop_on(stops)
        yield stops
    finally:
        asked = stops.asked  # decided once: a signal from here on is handled by the end
        for s, handler in before.items():
            signal.signal(s, end_now if asked else handler)
        stops.unasked()


def request_ended(work: threading.Lock, hurry: Flag) -> bool:
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


def told(waiting: Callable[[], int], hurry: Flag, until: int = 0) -> bool:
    """Whether the requests still waiting when the server stopped were told so (their
    count, ``waiting()``, down to ``until``) within :data:`TELL` seconds, before
    ``hurry``: each stops waiting within :data:`POLL` and writes its refusal."""
    deadline = time.monotonic() + TELL
    while waiting() > until:
        if hurry.is_set() or time.monotonic() >= deadline:
            return False
        time.sleep(POLL / 4)
    return True
