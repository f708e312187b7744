"""Questions of one conversation, one at a time, without any UI.

A question asked while the last one is being answered is refused; one asked once the last
answer is complete, while its graph is still being built for the cache, waits and is
asked next.  Closing keeps what was not answered as a draft.  The app drives this; `drag
chat --plain` reads the next line only after an answer is complete, so it never queues,
and keeps a failed question the same way (drafts.kept_error)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from enum import Enum
from typing import Generic, TypeVar

from assistant.base.errors import DragError
from assistant.core import drafts

T = TypeVar("T")  # what the caller shows a question as (the app: its turn on screen)


class Offer(Enum):
    START = "start"  # nothing is being asked: ask it now
    WAIT = "wait"  # the last answer is complete, its graph is not: asked next
    BUSY = "busy"  # refused: one question at a time


@dataclass
class Asked(Generic[T]):
    question: str
    view: T


class Queue(Generic[T]):
    def __init__(self) -> None:
        self.current: Asked[T] | None = None  # the question being answered
        self.answered = False  # its answer is complete; the graph is being built
        self.next: Asked[T] | None = None  # asked meanwhile
        self.kept: Asked[T] | None = None  # the current one, kept by a close: not twice

    @property
    def busy(self) -> bool:
        return self.current is not None

    def offer(self, question: str) -> Offer:
        """What happens to ``question`` if it is asked now (nothing changes yet)."""
        if self.current is None:
            return Offer.START
        if self.answered and self.next is None:
            return Offer.WAIT
        return Offer.BUSY

    def add(self, question: str, view: T) -> Asked[T] | None:
        """Take a question :meth:`offer` did not refuse; returns it when it is to be asked
        now, None when it waits."""
        match self.offer(question):
            case Offer.START:
                self.current, self.answered = Asked(question, view), False
                return self.current
            case Offer.WAIT:
                self.next = Asked(question, view)
                return None
            case Offer.BUSY:
                raise ValueError("one question at a time: wait for the answer")

    def answer_complete(self) -> None:
        self.answered = True

    def done(self) -> Asked[T] | None:
        """The current question is finished (answered, failed or stopped); returns the
        one that waited, now current, to be asked."""
        self.current, self.answered = None, False
        waiting, self.next = self.next, None
        if waiting is not None:
            self.current = waiting
        return waiting

    def close(self) -> bool:
        """Closing while answering: keep the question whose answer is not complete, and
        the one that waited, as drafts.  Returns whether a question was still being
        worked on (its work is to be stopped)."""
        # Marked before they are written: a close that comes inside this one (a signal's)
        # keeps nothing twice.
        current = self.current if not self.answered and self.current is not self.kept else None
        waiting, self.next, self.kept = self.next, None, self.current
        with contextlib.suppress(DragError, OSError):  # closing: no one to tell
            if current is not None:
                drafts.keep(current.question, "the app was closed before the answer was complete")
            if waiting is not None:
                drafts.keep(waiting.question, "the app was closed before it was asked")
        return self.current is not None
