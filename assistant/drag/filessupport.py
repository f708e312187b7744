"""Whether the passages the student read hold its answer: a "not in your files" that is
earned.

The student answers first; then the answer is checked against what it read, and the
reply is "Your files do not say." when the passages do not bear it out:

- **the answer's own words** (those the question does not already say) are looked for in
  each passage read; the passage that holds most of them is the one the answer comes
  from.  When it holds fewer than :data:`FOUND_AT_LEAST` of them, the student wrote
  something the files do not say;
- **the question's words** must be in that passage too, each weighed by how rare it is in
  the files (:meth:`assistant.drag.graphsearch.GraphIndex.weight`): an answer read from a
  chat about something else ("the Thai spot" of another evening) covers less than
  :data:`COVERED_AT_LEAST` of the question's weight;
- **a day the question names** (``on 20260609``, "June 9, 2026") must be that passage's
  day, or a day it writes;
- **the student must be sure of every token it wrote**: an answer one of whose tokens it
  found less likely than :data:`SURE_AT_LEAST` (a natural log-probability: about one
  chance in 7.4) is one it was guessing at; a yes or a no too.

A reply the student wrote as "not in the files" stands as it is.  Nothing here asks the
student anything: the check reads words, and the probabilities the student gave its
tokens as it wrote them, so it costs no time worth measuring.  The thresholds were chosen
on the tune half of LiHuaWorld's dev questions (the answerable ones' right replies held
back at most 5 %); the figures are reported on the other half (docs/benchmarks.md, "Your
own files").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from assistant.base.textform import Date, dates_in, day_spans
from assistant.drag.filescut import question_weights, stems
from assistant.drag.querywords import wordset

CHECK_VERSION = "files-support-v3"  # v3: only the days an answer names set aside
FOUND_AT_LEAST = 0.25
COVERED_AT_LEAST = 0.2
# The least likely token of an answer let through (natural log-probability).  Chosen on
# the tune half by the rule written before its run (docs/results/local-docs-sureness-tune).
SURE_AT_LEAST = -2.0
# Words an answer uses to talk about the files, or to say yes or no, not to say what
# the files say.
NOT_THE_ANSWERS = wordset(
    """excerpt excerpts file files message messages chat chats mention mentioned mentions
    say says said specific specifically provided given information detail details based
    according also yes no"""
)


_YES_OR_NO = re.compile(r"(?i)\s*(?:yes|no)\b")


# A time of day right after a day ("2026-06-02 20:00", "June 2, 2026 at 8 pm",
# "20260602_2000"): part of the day's stamp, as a passage's time is not in its text.
_TIME_AFTER = re.compile(
    r"(?:[ T]\d{1,2}:\d\d|_\d{4}|,?\s+at\s+\d{1,2}(?::\d\d)?(?:\s*[ap]\.?m\b\.?)?"
    r"|\s+\d{1,2}(?::\d\d)?\s*[ap]\.?m\b\.?)(?![\w:])",
    re.IGNORECASE,
)


def _without_days(text: str) -> str:
    """``text`` less the days it names ("2026-02-09", "20260209_13:00", "February 9,
    2026 at 8 pm"), with a time of day written right after one: a day is looked for as
    a day, not as words.  Its other numbers and words stay to be found ("12 pizzas on
    2026-02-09" still asks for the 12)."""
    out, last = [], 0
    for start, end in day_spans(text, compact=True):
        if start < last:  # inside the time of the day before
            continue
        time = _TIME_AFTER.match(text, end)
        out += [text[last:start], " "]
        last = time.end() if time else end
    return "".join(out) + text[last:]


def day_of(time: str) -> Date | None:
    """A passage's time (``2026-06-09 19:00``) as a day."""
    head = time[:10]
    if len(head) == 10 and head[4] == "-" and head[7] == "-" and head.replace("-", "").isdigit():
        return (int(head[:4]) % 100, int(head[5:7]), int(head[8:10]))
    return None


@dataclass(frozen=True)
class Support:
    """What the check found (``AskResult.provenance["support"]``)."""

    said: int  # the answer's own words (not the question's)
    found: float  # the share of them in the passage the answer comes from
    covered: float  # the share of the question's weight in that passage
    day: bool | None  # that passage is of the day the question names; None: it names none
    passage: int  # that passage's place among those read, from 1; 0: none (or no answer)
    # How likely the student found each token of its answer (natural log; empty where
    # not read).
    logprobs: tuple[float, ...] = ()

    @property
    def unsure(self) -> bool:
        """The student wrote a token it found less likely than :data:`SURE_AT_LEAST`."""
        return bool(self.logprobs) and min(self.logprobs) < SURE_AT_LEAST

    @property
    def not_in_files(self) -> bool:
        if not self.passage or self.day is False:
            return True
        if self.said and self.found < FOUND_AT_LEAST:
            return True
        if self.unsure:
            return True
        return self.covered < COVERED_AT_LEAST

    def to_dict(self) -> dict[str, Any]:
        return {
            "said": self.said,
            "found": round(self.found, 3),
            "covered": round(self.covered, 3),
            "day": self.day,
            "passage": self.passage,
            "not_in_files": self.not_in_files,
            "logprobs": [round(p, 3) for p in self.logprobs],
            "unsure": self.unsure,
        }


def check(
    question: str,
    reply: str,
    read: Sequence[tuple[str, str]],
    weight: Callable[[str], float],
    logprobs: Sequence[float] = (),
) -> Support:
    """``read``: (text, time) of each passage the student read, in the order it read
    them; ``weight``: how much a word of the files weighs; ``logprobs``: of the reply's
    tokens (empty: not judged)."""
    if not reply.strip():  # the student wrote nothing: no answer to bear out
        return Support(0, 0.0, 0.0, None, 0, tuple(logprobs))
    asked = question_weights(question, weight)
    # A yes or a no says nothing more than the question: its words are the question's
    # alone (its sureness is judged as any answer's).  A day the answer names is found
    # in a passage of that day, or one that writes it.
    yes_or_no = bool(_YES_OR_NO.match(reply))
    named = set() if yes_or_no else dates_in(reply, compact=True)
    said = set() if yes_or_no else stems(_without_days(reply))
    said = said - asked.keys() - NOT_THE_ANSWERS
    total = sum(asked.values())
    days = dates_in(question, compact=True)
    best: tuple[float, float, int] = (-1.0, -1.0, 0)
    for place, (text, time) in enumerate(read, start=1):
        held = stems(text)
        on_day = bool(named) and (
            day_of(time) in named or bool(dates_in(text, compact=True) & named)
        )
        words = len(said) + bool(named)
        found = (len(said & held) + on_day) / words if words else 1.0
        covered = sum(w for s, w in asked.items() if s in held) / total if total else 1.0
        best = max(best, (found, covered, -place))
    found, covered, place = best[0], best[1], -best[2]
    if not place:
        return Support(len(said) + bool(named), 0.0, 0.0, None, 0, tuple(logprobs))
    day: bool | None = None
    if days:
        text, time = read[place - 1]
        day = day_of(time) in days or bool(dates_in(text, compact=True) & days)
    return Support(len(said) + bool(named), found, covered, day, place, tuple(logprobs))
