"""The signals a long-running drag process stops on (`drag serve`, `drag teacher serve`,
the local teacher's keeper), set in one place."""

from __future__ import annotations

import signal
from collections.abc import Callable
from types import FrameType
from typing import Any

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
