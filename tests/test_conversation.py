"""One question at a time, without the app: the queue the chat screen drives."""

from __future__ import annotations

import pytest

from assistant.core import drafts
from assistant.core.conversation import Offer, Queue


def test_a_question_asked_while_the_last_is_answered_is_refused() -> None:
    queue: Queue[str] = Queue()
    assert queue.offer("first") is Offer.START
    asked = queue.add("first", "turn 1")
    assert asked is not None and (asked.question, asked.view) == ("first", "turn 1")
    assert queue.offer("second") is Offer.BUSY
    with pytest.raises(ValueError, match="one question at a time"):
        queue.add("second", "turn 2")


def test_a_question_asked_once_the_answer_is_complete_waits_for_the_graph() -> None:
    queue: Queue[str] = Queue()
    queue.add("first", "turn 1")
    queue.answer_complete()
    assert queue.offer("second") is Offer.WAIT
    assert queue.add("second", "turn 2") is None  # waits
    assert queue.offer("third") is Offer.BUSY  # one waits at most
    waiting = queue.done()
    assert waiting is not None and waiting.question == "second"
    assert queue.current is waiting and not queue.answered
    assert queue.done() is None and not queue.busy


def test_closing_keeps_the_unanswered_and_the_waiting_question_as_drafts() -> None:
    queue: Queue[str] = Queue()
    queue.add("What did Dr. Amelia Thompson say?", "turn 1")
    assert queue.close()  # still working: to be stopped
    queue.done()
    queue.add("an answered one", "turn 2")
    queue.answer_complete()
    queue.add("one that waited", "turn 3")
    assert queue.close()
    kept = {r["question"] for r in drafts.listing()}
    assert {"What did Dr. Amelia Thompson say?", "one that waited"} <= kept
    assert "an answered one" not in kept
    queue.done()
    assert not queue.close()  # nothing being worked on


def test_closing_twice_keeps_the_question_once() -> None:
    """Quitting and then a signal (or two signals: a closed terminal sends two) each
    closed the queue, and each kept the unanswered question: two drafts of one."""
    queue: Queue[str] = Queue()
    before = len(drafts.listing())
    queue.add("Where did Marta Kowalski move to?", "turn 1")
    assert queue.close() and queue.close()  # still working, both times
    assert len(drafts.listing()) == before + 1
    queue.done()
    queue.add("Where did Marta Kowalski move to?", "turn 2")  # asked again: kept again
    assert queue.close()
    assert len(drafts.listing()) == before + 2
