"""The privacy reader's reply, read as it streams (:mod:`assistant.privacy.reader`).

:class:`Watch` sees each piece of the model's reply as it is written: it stops the
reading past its deadline, stops a model that lists on and on (values of no use in a
row), and notes how far into the text the model got, so that the reader can read the
rest again.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator

from assistant.base.errors import PrivacyError
from assistant.base.textform import word_char
from assistant.privacy.values import CATEGORIES

MAX_JUNK = 3  # values of no use in a row: the model is looping


def occurrences(text: str, value: str) -> Iterator[tuple[int, int]]:
    """Where ``value`` stands in ``text`` word for word (in any case: small models change
    it), not inside a longer word."""
    for m in re.finditer(re.escape(value), text, re.IGNORECASE):
        start, end = m.span()
        inside = (start > 0 and word_char(text[start - 1]) and word_char(value[0])) or (
            end < len(text) and word_char(text[end]) and word_char(value[-1])
        )
        if not inside:
            yield start, end


class Rambling(Exception):
    """The model lists one thing after another that is not in the text (a loop)."""


class Closed(Exception):
    """The reply's JSON object is complete (a reply written without the grammar may go
    on with prose)."""


_DECODER = json.JSONDecoder()
# A complete [category, value] pair in the reply as it streams.
_PAIR = re.compile(r'\[\s*"([a-z]+)"\s*,\s*("(?:[^"\\]|\\.)*")\s*\]')


class Watch:
    """Reads the reply as it streams: past the deadline it stops the reading (a
    PrivacyError); after :data:`MAX_JUNK` listed values in a row that are of no use (not
    in the text, or listed before: a loop) it stops the model, keeping the pairs before.
    A value of the text that is not worth hiding (a topic) is no pair, but the model is
    reading on: it breaks a row of useless ones, and says how far the model got."""

    def __init__(
        self,
        deadline: float,
        timeout: float,
        kind: Callable[[str], str],
        *,
        closes: bool = False,
    ) -> None:
        self.closes = closes  # stop the model once the reply is one whole JSON object
        self.deadline = deadline
        self.timeout = timeout
        self.kind = kind
        self.mentioned: list[str] = []
        self.odd: list[str] = []  # values of the text under a category not asked for
        self.reply = ""
        self.scanned = 0
        self.junk = 0
        self.pairs: list[tuple[str, str]] = []
        self.seen: set[str] = set()

    def __call__(self, piece: str) -> None:
        if time.perf_counter() > self.deadline:
            raise PrivacyError(
                f"the local privacy reader took longer than its {self.timeout:g} s for "
                "each 1,000 characters (privacy.reader_timeout); nothing was sent"
            )
        self.reply += piece
        if self.closes and "}" in piece and (start := self.reply.find("{")) >= 0:
            try:  # from its first "{": a model may open a code fence first
                _value, end = _DECODER.raw_decode(self.reply, start)
            except ValueError:
                pass
            else:
                self.reply = self.reply[start:end]
                raise Closed
        if self._count():
            raise Rambling

    def _count(self) -> bool:
        """Counts the pairs completed since the last piece; True when :data:`MAX_JUNK`
        values of no use came in a row (a loop)."""
        for m in _PAIR.finditer(self.reply, self.scanned):
            self.scanned = m.end()
            try:
                value = json.loads(m.group(2))
            except ValueError:
                continue
            key = value.strip().casefold()
            what = self.kind(value) if key not in self.seen else "again"
            if m.group(1) in CATEGORIES and what == "good":
                self.seen.add(key)
                self.pairs.append((m.group(1), value))
                self.junk = 0
            elif what == "mentioned":
                self.seen.add(key)
                self.mentioned.append(value)
                self.junk = 0
            else:
                if m.group(1) not in CATEGORIES and what in ("good", "mentioned"):
                    self.odd.append(value)
                self.junk += 1
                if self.junk >= MAX_JUNK:
                    return True
        return False

    def reach(self, piece: str) -> int:
        """How far into ``piece`` the model got: the end of the furthest value it listed
        from the text (one to hide or not) where it first stands (a value said again
        later says nothing of what lies between); but no further than the earliest in
        the text of the values it filed under a category not asked for (read again)."""
        firsts = [
            next(occurrences(piece, v.strip()), None)
            for v in (*(v for _c, v in self.pairs), *self.mentioned)
            if v.strip()
        ]
        reached = max((span[1] for span in firsts if span), default=0)
        odd = [next(occurrences(piece, v.strip()), None) for v in self.odd if v.strip()]
        return min([reached, *(span[0] for span in odd if span)])
