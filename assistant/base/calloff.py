"""Work another thread calls off: the app closed while its worker waits on the network.

A worker runs its work inside ``scope(call_off)``; a wait on the network in it (the
teacher's reply, drag serve's events) asks :func:`current` and registers how to be woken
(:meth:`CallOff.waking`), so that ``call_off.set()`` from the app's thread ends the wait
at once instead of at the request's timeout (300 s by default)."""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

from assistant.base.errors import Interrupted

T = TypeVar("T")


class CallOff:
    """An event that calls work off, and wakes what waits in that work when it is set."""

    def __init__(self) -> None:
        self._set = threading.Event()
        self._lock = threading.Lock()
        self._wake: list[Callable[[], None]] = []

    def set(self) -> None:
        with self._lock:
            self._set.set()
            wake = list(self._wake)
        for call in wake:
            call()

    def clear(self) -> None:
        self._set.clear()

    def is_set(self) -> bool:
        return self._set.is_set()

    @contextlib.contextmanager
    def waking(self, call: Callable[[], None]) -> Iterator[None]:
        """``call()`` when this is set while the block runs (at once when it already is);
        ``call`` must not block: it is run in the thread that sets this."""
        with self._lock:
            now = self._set.is_set()
            if not now:
                self._wake.append(call)
        if now:
            call()
        try:
            yield
        finally:
            with self._lock:
                if call in self._wake:
                    self._wake.remove(call)


_current: contextvars.ContextVar[CallOff | None] = contextvars.ContextVar(
    "drag_call_off", default=None
)


@contextlib.contextmanager
def scope(call_off: CallOff) -> Iterator[None]:
    """Waits on the network inside the block end when ``call_off`` is set."""
    token = _current.set(call_off)
    try:
        yield
    finally:
        _current.reset(token)


def current() -> CallOff | None:
    """What calls the work in progress off; None outside a scope (a command line's
    work: Ctrl+C and signals interrupt it in the main thread)."""
    return _current.get()


def unless_called_off(
    call_off: CallOff, work: Callable[[], T], *, give_up: Callable[[], None], said: str
) -> T:
    """``work()``, run in a thread of its own (a daemon: it ends with the process) that
    this one stops waiting for when ``call_off`` is set first: then ``give_up()`` is
    called, and Interrupted(``said``) raised.  Either ``work``'s result (or error) is
    handed back, or ``give_up`` is called: never both, never neither."""
    if call_off.is_set():  # never begun
        give_up()
        raise Interrupted(said)
    done = threading.Event()
    lock = threading.Lock()
    box: dict[str, T] = {}
    failed: list[BaseException] = []

    def run() -> None:
        try:
            result = work()
        except BaseException as exc:  # handed to the thread that asked
            with lock:
                failed.append(exc)
        else:
            with lock:
                box["result"] = result
        finally:
            done.set()

    # The context goes along: what the work reads of it (egress's flight) is there.
    helper = threading.Thread(
        target=contextvars.copy_context().run, args=(run,), name="drag-call-off", daemon=True
    )
    with call_off.waking(done.set):
        helper.start()
        done.wait()
    with lock:
        if not box and not failed:  # woken by the call-off, the work still under way
            give_up()
            raise Interrupted(said)
    if failed:
        raise failed[0]
    return box["result"]


CALLED_OFF = "the app was closed"


def called_off() -> bool:
    """Whether the work in progress is called off (never outside a scope)."""
    call_off = _current.get()
    return call_off is not None and call_off.is_set()


def check() -> None:
    """Interrupted, once the work in progress is called off."""
    if called_off():
        raise Interrupted(CALLED_OFF)


def checking(on_piece: Callable[[str], None] | None) -> Callable[[str], None] | None:
    """``on_piece`` for a model's reply, that first :func:`check`\\ s: the reply stops at
    its next piece once called off (a model's decoding cannot be woken otherwise).
    Outside a scope, ``on_piece`` itself."""
    if _current.get() is None:
        return on_piece

    def told(piece: str) -> None:
        check()
        if on_piece is not None:
            on_piece(piece)

    return told
