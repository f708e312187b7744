"""Answering from the user's files, the pure parts: the passages cut to the messages that
answer (:mod:`assistant.drag.filescut`) and the check that the passages read bear the
answer out (:mod:`assistant.drag.filessupport`).  The weights and token counts given to
them are fakes (a table, a word count), named so."""

from __future__ import annotations

import time

import pytest

from assistant.base.textform import day_spans
from assistant.drag import filescut, filessupport
from assistant.drag.filescut import GAP
from assistant.drag.querywords import stem

CHAT = "\n".join(
    [
        "LiHua: Hey Jake, did you watch the match?",
        "JakeWatson: Yes! What a game.",
        "LiHua: Any plans for the weekend?",
        "JakeWatson: Got any favorite snacks for the game?",
        "LiHua: I love nachos with cheese and spicy salsa!",
        "JakeWatson: Pizza is a must too.",
        "LiHua: See you on Wednesday then.",
    ]
)


def fake_weight(word: str) -> float:
    """A fake of the index's word weights: a few words rarer than the rest."""
    return {"snacks": 3.0, "favorite": 2.0, "pizza": 2.5, "lihua": 0.1}.get(word, 1.0)


def fake_cost(text: str) -> int:
    """A fake of the student's token count: one token a word."""
    return len(text.split())


def test_a_passage_is_cut_to_the_message_with_the_questions_words_and_its_neighbours() -> None:
    [cut] = filescut.cut("What are LiHua's favorite snacks?", [CHAT], fake_weight, fake_cost, 26)
    assert cut.text.splitlines() == [
        GAP,
        "LiHua: Any plans for the weekend?",
        "JakeWatson: Got any favorite snacks for the game?",
        "LiHua: I love nachos with cheese and spicy salsa!",  # the reply: it answers
        GAP,
    ]
    assert (cut.index, cut.kept, cut.of) == (0, 3, 7)


def test_the_best_messages_of_all_passages_come_first_within_the_budget() -> None:
    other = "Wolfgang: The pizza place on Kings Road is new.\nWolfgang: It opens at nine."
    cuts = filescut.cut("favorite snacks and pizza", [other, CHAT], fake_weight, fake_cost, 50)
    # "favorite snacks" (5.0) before "pizza" (2.5): the second passage's message and its
    # neighbours first, then what is left of the budget for the rest.
    spent = sum(fake_cost(line) + 1 for c in cuts for line in c.text.splitlines() if line != GAP)
    assert spent <= 50
    assert [c.index for c in cuts] == [0, 1]  # read in the order the search gave them
    assert "favorite snacks" in cuts[1].text and "Pizza is a must" in cuts[1].text
    assert cuts[0].text.splitlines()[0] == "Wolfgang: The pizza place on Kings Road is new."
    # A budget for one message alone: the best one, and nothing of the other passage.
    [alone] = filescut.cut("favorite snacks and pizza", [other, CHAT], fake_weight, fake_cost, 9)
    assert alone.index == 1 and alone.text.splitlines()[1:2] == [
        "JakeWatson: Got any favorite snacks for the game?"
    ]


def test_a_question_with_no_word_in_any_message_reads_the_passages_from_the_start() -> None:
    cuts = filescut.cut("Who won?", [CHAT, "Other: text"], fake_weight, fake_cost, 15)
    assert [c.index for c in cuts] == [0]
    assert cuts[0].text.splitlines() == [
        "LiHua: Hey Jake, did you watch the match?",
        "JakeWatson: Yes! What a game.",
        GAP,
    ]


def test_a_long_paragraph_is_read_a_few_sentences_at_a_time_in_linear_time() -> None:
    paragraph = " ".join(f"Sentence {i} says little." for i in range(40))
    pieces = filescut.units(paragraph)
    assert len(pieces) > 1 and all(len(p) <= filescut.UNIT_CHARS for p in pieces)
    assert " ".join(pieces) == paragraph  # nothing lost, nothing added
    big = " ".join(f"Sentence {i} says little." for i in range(200_000))  # 5 MB
    started = time.perf_counter()
    assert len(filescut.units(big)) > 1000
    assert time.perf_counter() - started < 5.0  # quadratic work would take minutes


@pytest.mark.parametrize(
    ("word", "stemmed"),
    [
        ("snacks", "snack"),
        ("snack's", "snack"),
        ("parties", "party"),
        ("boxes", "box"),
        ("bus", "bus"),
        ("class", "class"),
        ("is", "is"),
        ("campus", "campus"),
        ("asked", "ask"),
        ("renovating", "renovat"),
        ("renovated", "renovat"),
        ("studied", "study"),
        ("king", "king"),
        ("red", "red"),
        ("needed", "need"),
    ],
)
def test_a_word_is_matched_without_its_plural_or_possessive(word: str, stemmed: str) -> None:
    assert stem(word) == stemmed


READ = [
    (
        "JakeWatson: Got any favorite snacks for the game?\nLiHua: I love nachos with cheese!",
        "2026-10-05 10:05",
    ),
    ("Wolfgang: The Thai spot was great tonight.", "2026-06-02 20:00"),
]


def check(question: str, reply: str, read=READ) -> filessupport.Support:  # type: ignore[no-untyped-def]
    return filessupport.check(question, reply, read, fake_weight)


def test_an_answer_the_passages_hold_with_the_questions_words_is_borne_out() -> None:
    found = check("What are LiHua's favorite snacks?", "Nachos with cheese.")
    assert (found.passage, found.found, found.day) == (1, 1.0, None)
    assert found.covered >= filessupport.COVERED_AT_LEAST and not found.not_in_files


def test_an_answer_no_passage_holds_is_not_in_your_files() -> None:
    found = check("What are LiHua's favorite snacks?", "Popcorn and pretzels.")
    assert found.found == 0.0 and found.not_in_files


def test_an_answer_read_from_a_passage_about_something_else_is_not_in_your_files() -> None:
    found = check("Which dessert did Li Hua order after the hot pot?", "The Thai spot.")
    assert found.passage == 2 and found.found == 1.0
    assert found.covered < filessupport.COVERED_AT_LEAST and found.not_in_files


def test_a_day_the_question_names_must_be_the_passages_or_written_in_it() -> None:
    asked = "Where did Wolfgang eat on 20260609?"
    assert check(asked, "The Thai spot.").day is False
    assert check(asked, "The Thai spot.").not_in_files
    that_day = [("Wolfgang: The Thai spot was great tonight.", "2026-06-09 20:00")]
    assert check(asked, "The Thai spot.", that_day).day is True
    written = [("Wolfgang: On June 9, 2026 we eat at the Thai spot.", "2026-06-01 09:00")]
    assert check(asked, "The Thai spot.", written).day is True


def test_a_yes_or_no_answer_is_judged_by_the_questions_words_alone() -> None:
    found = check("Did Jake ask about favorite snacks?", "Yes.")
    assert found.said == 0 and found.found == 1.0 and not found.not_in_files
    assert check("Did Jake ask about the opera tickets?", "Yes.").not_in_files


def test_an_answer_that_starts_with_yes_or_no_is_judged_as_a_yes_or_a_no() -> None:
    found = check("Did Jake ask about favorite snacks?", "Yes, Jake asked about popcorn.")
    assert found.said == 0 and not found.not_in_files


def test_a_day_the_answer_names_is_found_in_a_passage_of_that_day() -> None:
    asked = "When did Wolfgang mention the Thai spot?"
    for written in ("2026-06-02", "June 2, 2026", "20260602", "20260602_20:00"):
        found = check(asked, written)
        assert (found.said, found.found, found.passage) == (1, 1.0, 2), written
    assert check(asked, "2026-06-03").found == 0.0
    assert check(asked, "2026-06-03").not_in_files


def test_an_answer_naming_a_day_has_its_other_numbers_and_words_checked() -> None:
    # The day is looked for as a day; what else the answer says is looked for as words
    # ("12", "3", "marathon" are not in the passage of that day).
    asked = "When did Wolfgang mention the Thai spot?"
    counted = check(asked, "On 2026-06-02: 12 friends, 3 cars.")
    assert (counted.said, counted.found, counted.passage) == (5, 0.2, 2)
    assert counted.not_in_files
    named = check(asked, "20260602_20:00, the marathon.")
    assert (named.said, named.found, named.passage) == (2, 0.5, 2)
    assert not check(asked, "On 2026-06-02, tonight.").not_in_files
    # A time of day written after the day is part of the day, as a passage's time is.
    for timed in ("On 2026-06-02 20:00, tonight.", "June 2, 2026 at 8 pm, tonight."):
        found = check(asked, timed)
        assert (found.said, found.found, found.passage) == (2, 1.0, 2), timed


def test_the_days_an_answer_names_are_read_where_they_stand() -> None:
    text = "On 20260901_13:00 and June 2, 2026 (not 20261345, not May 3) we met 12 friends."
    spans = day_spans(text, compact=True)
    assert [text[s:e] for s, e in spans] == ["20260901_13:00", "June 2, 2026"]
    assert day_spans(text) == [spans[1]]  # a compact day only with compact


def test_words_about_the_files_are_not_the_answers_own() -> None:
    found = check("What are LiHua's favorite snacks?", "The excerpts mention nachos.")
    assert found.said == 1 and found.found == 1.0


def test_an_empty_reply_is_not_in_your_files() -> None:
    for nothing in ("", "  \n"):
        found = check("What are LiHua's favorite snacks?", nothing)
        assert found.passage == 0 and found.not_in_files


def test_nothing_read_is_not_in_your_files() -> None:
    found = check("What are LiHua's favorite snacks?", "Nachos.", read=[])
    assert found.passage == 0 and found.not_in_files
    assert found.to_dict()["not_in_files"] is True


def test_an_answer_with_a_token_the_student_was_guessing_at_is_not_in_your_files() -> None:
    asked, reply = "What are LiHua's favorite snacks?", "Nachos with cheese."
    sure = filessupport.SURE_AT_LEAST
    borne = filessupport.check(asked, reply, READ, fake_weight, [-0.01, sure, -0.2])
    assert not borne.not_in_files and borne.to_dict()["logprobs"] == [-0.01, sure, -0.2]
    guessed = filessupport.check(asked, reply, READ, fake_weight, [-0.01, sure - 0.01, -0.2])
    assert guessed.not_in_files
    assert guessed.to_dict()["unsure"] and not borne.to_dict()["unsure"]
    # A yes or a no too: its words are the question's, its sureness its own.
    asked_yes = "Did Jake ask about favorite snacks?"
    assert not check(asked_yes, "Yes.").not_in_files
    guessed_yes = filessupport.check(asked_yes, "Yes.", READ, fake_weight, [sure - 0.01])
    assert guessed_yes.not_in_files
    # Not read (another caller, a model that gives none): judged by the words alone.
    assert not filessupport.check(asked, reply, READ, fake_weight, []).not_in_files
