"""The retriever's order for a question that names a day (pure logic: a corpus made by
hand, vectors written out, no model)."""

from __future__ import annotations

import numpy as np
import pytest

from assistant.base.textform import dates_in, month_days
from assistant.drag.graphsearch import GraphIndex
from assistant.store.corpus import Corpus

DIM = 4


class FakeEmbedder:
    """Never asked: the corpus below has no entities to match a question's words to."""

    def embed(self, texts: list[str]) -> np.ndarray:
        raise AssertionError("the fake embedder was asked to embed")


# Four chats about the basement on other days; two chats of 7 July that do not say
# "basement" and point away from the question's vector, the second less so.
CHATS = [
    ("2026-06-01 10:00", "Adam: the basement is damp, the basement smells.", [1, 0, 0, 0]),
    ("2026-06-02 10:00", "Adam: the basement pump broke again in the basement.", [1, 0.1, 0, 0]),
    ("2026-06-03 10:00", "LiHua: basement paint or basement tiles?", [1, 0.2, 0, 0]),
    ("2026-06-04 10:00", "Adam: the basement stairs creak.", [1, 0.3, 0, 0]),
    ("2026-07-07 16:00", "Adam: water came in downstairs after the storm.", [0, 0, 1, 0]),
    ("2026-07-07 18:00", "Adam: the plumber comes on Friday.", [0.3, 0, 0, 1]),
]


def _index() -> GraphIndex:
    vectors = np.array([v for _, _, v in CHATS], dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return GraphIndex(
        Corpus(
            np.arange(len(CHATS), dtype=np.int64),
            [text for _, text, _ in CHATS],
            [(f"chat{i}.txt", time, 0) for i, (time, _, _) in enumerate(CHATS)],
            vectors,
            np.zeros(0, dtype=np.int64),
            [],
            [],
            np.zeros((0, DIM), dtype=np.float32),
            [],
        )
    )


def _times(question: str) -> list[str]:
    q_vec = np.array([1, 0, 0, 0], dtype=np.float32)
    hits, _ = _index().search(question, q_vec, FakeEmbedder(), 2)
    return [h.time for h in hits]


@pytest.mark.parametrize(
    "question",
    [
        "Why is Adam worried about the basement on 20260707?",
        "Why is Adam worried about the basement on July 7th?",
        "Why is Adam worried about the basement on the 7th of July?",
        "Why is Adam worried about the basement in the chat of 20260707_16:00?",
    ],
)
def test_the_chats_of_a_day_the_question_names_come_first(question: str) -> None:
    # Both of the day's chats, ahead of four that hold the question's words and point
    # its way; among themselves in the fused order (the one nearer the question first).
    assert _times(question) == ["2026-07-07 18:00", "2026-07-07 16:00"]


def test_a_question_naming_no_day_reads_the_chats_its_words_find() -> None:
    times = _times("Why is Adam worried about the basement?")
    assert "2026-07-07 16:00" not in times


def test_a_day_is_read_without_a_year_and_not_from_a_verb() -> None:
    assert month_days("What does Li Hua report to Adam on January 6th?") == {(1, 6)}
    assert month_days("on the 6th of January") == {(1, 6)}
    assert month_days("May 6th") == {(5, 6)}
    assert not month_days("you may 5 times ask")
    assert not month_days("we march 3 miles in august 12 of us")
    assert month_days("March 3 or August 12") == {(3, 3), (8, 12)}
    assert not month_days("January 6th, 2026")  # a whole date: dates_in reads it
    assert not month_days("June 32nd")
    assert dates_in("the chat of 20260901_13:00", compact=True) == {(26, 9, 1)}
    assert not dates_in("x20260901", compact=True)


def test_a_day_is_read_in_the_forms_people_write_it() -> None:
    """Short month names ("Jan 6", "3rd Sept"; capitalised, as "May"), a weekday before,
    "the" between: each the same day; a lower-case short form is a word, not a month."""
    for text in ("on Jan 6", "on Jan. 6th", "on the 6th of Jan", "on Tuesday, January 6"):
        assert month_days(text) == {(1, 6)}, text
    assert month_days("on Sept 3 and 3rd Sept and Sep 3") == {(9, 3)}
    assert not month_days("ask jan 6 things") and not month_days("a dec 24 star")
    assert not month_days("on 6 Janet")
    assert dates_in("on January the 6th, 2026") == dates_in("on 2026-01-06") == {(26, 1, 6)}
    # With a year, a month is read by its first letters: other languages' names too.
    assert dates_in("3 marzo 1985") == {(85, 3, 3)} and dates_in("12 janvier 2026") == {(26, 1, 12)}
