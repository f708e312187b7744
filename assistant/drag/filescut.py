"""The messages of the user's files that answer, not the chat's first line.

A passage of a chat is a run of messages; the one that answers a question is seldom
the first.  The student reads less and reads the right part when each passage is cut
to the messages that carry the question's words (each weighed by how rare it is in the
files, :meth:`assistant.drag.graphsearch.GraphIndex.weight`) and their neighbours (the
message before, often the question a friend asked; the one after, often the reply),
within a budget of the student's tokens (``files.read_tokens``).  The best messages
of all passages are taken first; a passage none of whose messages is taken is not
read.  Where no message holds a word of the question, the passages are read from
their start, best passage first, to the budget.  What the student read is what the
sources list shows: a gap is written "…".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from assistant.drag.querywords import keywords, stem

CUT_VERSION = "files-cut-v1"
GAP = "…"
UNIT_CHARS = 400  # a longer line (a paragraph of prose) is read a sentence or so at a time
NEIGHBOURS = (-1, 1)  # the message before and the one after a message taken
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+")


def units(text: str) -> list[str]:
    """A passage's messages: its lines (a chat's ``Sender: message``), a long one cut at
    sentence ends into pieces of about :data:`UNIT_CHARS` (linear in the text)."""
    out: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if len(line) <= UNIT_CHARS:
            out.append(line)
            continue
        piece = ""
        for sentence in _SENTENCE_END.split(line):
            if piece and len(piece) + 1 + len(sentence) > UNIT_CHARS:
                out.append(piece)
                piece = ""
            piece = f"{piece} {sentence}" if piece else sentence
        if piece:
            out.append(piece)
    return out


def question_weights(question: str, weight: Callable[[str], float]) -> dict[str, float]:
    """The question's words (their stems) and how much each weighs."""
    out: dict[str, float] = {}
    for word in keywords(question):
        key = stem(word)
        out[key] = max(out.get(key, 0.0), weight(word))
    return out


def stems(text: str) -> set[str]:
    return {stem(w) for w in keywords(text)}


def score(unit: str, asked: dict[str, float]) -> float:
    return sum(asked[s] for s in stems(unit) & asked.keys())


@dataclass(frozen=True)
class Cut:
    """One passage as the student reads it."""

    index: int  # the passage's place in the list given
    text: str  # the messages kept, in order, a gap written :data:`GAP`
    kept: int  # how many of its messages
    of: int  # of how many


def cut(
    question: str,
    passages: Sequence[str],
    weight: Callable[[str], float],
    cost: Callable[[str], int],
    budget: int,
) -> list[Cut]:
    """The passages (best first) cut to the messages that carry the question's words and
    their neighbours, ``cost`` (the student's tokens of a message) in all within
    ``budget``; the passages read, in the order given."""
    split = [units(p) for p in passages]
    asked = question_weights(question, weight)
    scored = sorted(
        (
            (-s, i, j)
            for i, msgs in enumerate(split)
            for j, m in enumerate(msgs)
            if (s := score(m, asked)) > 0
        )
    )
    taken: set[tuple[int, int]] = set()
    spent = 0

    def take(group: list[tuple[int, int]]) -> bool:
        nonlocal spent
        new = [g for g in group if g not in taken]
        more = sum(cost(split[i][j]) + 1 for i, j in new)
        if spent + more > budget:
            return False
        taken.update(new)
        spent += more
        return True

    for _s, i, j in scored:
        near = [(i, j + d) for d in (NEIGHBOURS[0], 0, *NEIGHBOURS[1:])]
        if not take([(a, b) for a, b in near if 0 <= b < len(split[a])]):
            take([(i, j)])
    if not taken:  # nothing of the question in any message: read from the start
        for i, msgs in enumerate(split):
            for j in range(len(msgs)):
                if not take([(i, j)]):
                    break
            else:
                continue
            break
    out = []
    for i, msgs in enumerate(split):
        rows = sorted(j for a, j in taken if a == i)
        if not rows:
            continue
        lines: list[str] = []
        if rows[0] > 0:
            lines.append(GAP)
        for n, j in enumerate(rows):
            if n and j != rows[n - 1] + 1:
                lines.append(GAP)
            lines.append(msgs[j])
        if rows[-1] < len(msgs) - 1:
            lines.append(GAP)
        out.append(Cut(i, "\n".join(lines), len(rows), len(msgs)))
    return out
