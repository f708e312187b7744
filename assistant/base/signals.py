"""The signals a long-running drag process stops on (`drag serve`, `drag teacher serve`,
the local teacher's keeper), set in one place."""

from __future__ import annotations

import contextlib
import functools
import os
import queue
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from types import FrameType
from typing import Any, NoReturn

STOPPING = (signal.SIGTERM, signal.SIGINT)

Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


def stop_on(handler: Handler) -> dict[signal.Signals, Handler]:
    """``handler`` for SIGTERM and SIGINT, and both unblocked in this thread: a blocked
    signal stays blocked across exec and a handler does not unblock it, so a process
    started by a parent that blocked them (a supervisor, a test runner's thread) would
    never see them.  Returns the handlers before."""
    before: dict[signal.Signals, Handler] = {s: signal.signal(s, handler) for s in STOPPING}
    if hasattr(signal, "pthread_sigmask"):  # not on Windows
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPPING)
    return before


ENDING = tuple(s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s)


def take(handler: Handler, numbers: Iterable[int | None]) -> dict[int, Handler]:
    """``handler`` for each signal of ``numbers`` (None: one this system lacks) that is
    not ignored: one ignored stays ignored (`nohup drag …`).  Returns the handlers
    before, for :func:`put_back`; none is taken outside the main thread (Python sets
    handlers there only)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {
        n: signal.signal(n, handler)
        for n in numbers
        if n is not None and signal.getsignal(n) != signal.SIG_IGN
    }


def put_back(before: dict[int, Handler]) -> None:
    """The handlers :func:`take` replaced, back (``before`` is emptied)."""
    while before:
        number, handler = before.popitem()
        signal.signal(number, handler)


def status(signum: int) -> int:
    """The exit status of a process a signal ended, as a shell counts it: 128 + the
    signal's number (143 for SIGTERM)."""
    return 128 + signum


# While above 0 (a question being kept): a signal only counts (:func:`held`).
_HOLDING = [0]
# A signal that came where its interrupt would be thrown away comes again so much later,
# at most so many times in a block (2 s: an import that never ends is interrupted there).
AGAIN_SECONDS = 0.05
MOST_TIMES_AGAIN = 40


@contextlib.contextmanager
def held() -> Iterator[None]:
    """While inside (a question being kept), a signal :func:`ending_as_interrupted`
    takes only counts: what is being done is not cut short (a closed terminal sends
    SIGHUP twice, systemd SIGTERM then SIGHUP)."""
    _HOLDING[0] += 1
    try:
        yield
    finally:
        _HOLDING[0] -= 1


def _thrown_away_in(frame: FrameType | None) -> bool:
    """Whether a KeyboardInterrupt raised in ``frame`` would be thrown away by Python:
    inside the import machinery (where it can also leave an import lock held) or an
    object's ``__del__`` (both seen: ``drag ask`` then waited for good)."""
    while frame is not None:
        code = frame.f_code
        if code.co_name == "__del__" or code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


@contextlib.contextmanager
def ending_as_interrupted() -> Iterator[list[int]]:
    """While inside, in the main thread: SIGTERM and SIGHUP (`timeout`, `kill`, a
    terminal closed) raise KeyboardInterrupt, as Ctrl+C does, so that what Ctrl+C keeps
    (a question) is kept then too; the list yielded gets each such signal's number (a
    caller that goes on after Ctrl+C ends on one of them).  None of the three is taken
    inside an import or an object's ``__del__``: a KeyboardInterrupt raised there is
    thrown away by Python (and in an import can leave a lock held, so that the models'
    loaders, and the end, which waits for them, wait for good); it comes again a moment
    later.  One ignored stays ignored (`nohup drag ask …`: the answer outlives the
    terminal).  The handlers before are put back after."""
    got: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield got
        return

    again = _Again()
    raised: list[int] = []  # the signal of the last interrupt raised
    ending = [False]  # the block's own end: its handlers being put back
    late: list[int] = []  # the signals that came then

    def interrupt(signum: int, frame: FrameType | None) -> None:
        if ending[0]:
            late.append(signum)
        if _HOLDING[0] or ending[0]:  # a question being kept, the end: the signal counts
            if signum != signal.SIGINT:
                got.append(signum)
            return
        if _thrown_away_in(frame) and again.send(signum):
            return
        if signum != signal.SIGINT:
            got.append(signum)
        raised[:] = [signum]
        raise KeyboardInterrupt

    # Where else Python throws an exception away (a weak reference's callback, a
    # generator closed by the collector), it tells sys.unraisablehook: an interrupt
    # thrown away there comes again, as one inside an import does.
    told_before = sys.unraisablehook

    def thrown_away(unraisable: Any) -> None:
        if not (unraisable.exc_type is KeyboardInterrupt and raised and again.send(raised[0])):
            told_before(unraisable)

    before = take(interrupt, ENDING)
    sys.unraisablehook = thrown_away
    failing = False
    try:
        yield got
    except BaseException:
        failing = True
        raise
    finally:
        ending[0] = True  # an interrupt here would leave handlers not put back
        try:
            again.close()  # none comes after the block, to a handler not its own
        finally:
            sys.unraisablehook = told_before
            put_back(before)
        if late and not failing:  # a block that ended well: the signal as it was sent
            os.kill(os.getpid(), late[0])


class _Again:
    """Sends a signal again :data:`AGAIN_SECONDS` later, at most
    :data:`MOST_TIMES_AGAIN` times, from a thread of its own started beforehand: the
    handler only puts the signal's number on a queue (which a handler may do; starting
    a thread there takes a lock the code it interrupted may hold)."""

    def __init__(self) -> None:
        self.times = 0
        self._queue: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        self._over = threading.Event()
        self._thread = threading.Thread(target=self._run, name="drag-signal-again", daemon=True)
        self._thread.start()

    def send(self, signum: int) -> bool:
        """Whether ``signum`` will come again (not past the most times)."""
        if self.times >= MOST_TIMES_AGAIN:
            return False
        self.times += 1
        self._queue.put(signum)
        return True

    def _run(self) -> None:
        while (signum := self._queue.get()) is not None:
            if self._over.wait(AGAIN_SECONDS):
                return
            os.kill(os.getpid(), signum)

    def close(self) -> None:
        """No signal is sent again from now on (one on its way has arrived)."""
        self._over.set()
        self._queue.put(None)
        self._thread.join()


def ended_as_interrupted(command: Callable[..., Any]) -> Callable[..., Any]:
    """``command`` run :func:`ending_as_interrupted`; an interruption a signal caused
    ends with 128 + its number (143 for SIGTERM), as a shell counts it, not Ctrl+C's
    130."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        from assistant.base import errors

        with ending_as_interrupted() as got, ended_there(got):
            try:
                return command(*args, **kwargs)
            except errors.Interrupted as exc:
                if got:
                    exc.exit_code = status(got[0])
                raise

    return run


def ended_by(signum: int) -> Exception:
    """The error of a command a signal ended: "interrupted", its status 128 + the
    signal's number (143 for SIGTERM), as a shell counts it."""
    from assistant.base import errors

    ended = errors.Interrupted("interrupted")
    ended.exit_code = status(signum)
    return ended


@contextlib.contextmanager
def ended_there(got: list[int]) -> Iterator[None]:
    """A KeyboardInterrupt that leaves the block after one of ``got``'s signals (from
    :func:`ending_as_interrupted`) is :func:`ended_by` that signal."""
    try:
        yield
    except KeyboardInterrupt:
        if not got:
            raise
        raise ended_by(got[0]) from None


class StopOnce:
    """The handler of a process that stops by KeyboardInterrupt (`drag teacher serve`,
    the local teacher's keeper: their main thread waits on a child or sleeps): the first
    signal raises it; a later one, or any once :meth:`stopping` was called, only sets
    :attr:`hurry`, so the stop that follows (its child ended, its record taken away) is
    never cut short.  A lock-free attribute: a handler may run inside another."""

    def __init__(self) -> None:
        self.hurry = False
        self._stopping = False

    def __call__(self, _signum: int, _frame: FrameType | None) -> None:
        if self._stopping:
            self.hurry = True
            return
        self._stopping = True
        raise KeyboardInterrupt

    def stopping(self) -> None:
        """The stop has begun: from now on a signal only hurries it."""
        self._stopping = True

    def hurried(self) -> bool:
        return self.hurry


def exit_stopped(code: int = 0) -> NoReturn:
    """End a process whose stop is done, at once: Python puts SIGINT's default handler
    back as its interpreter exits, so a signal then would end it by that signal."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a reader gone, a stream closed
            stream.flush()
    os._exit(code)
