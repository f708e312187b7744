"""The user's own terms: ``privacy.deny`` and the names learnt from their indexed files.

A term is found in any case and whatever space separates its words: spaces, a tab or
a line break ("Wolfgang\\nSchulz" in a pasted, wrapped e-mail is the name), never inside
a longer word of a spaced script; in a script written without spaces ("田中さん") it
has no edge to keep.  Terms are read in the form the detector reads text in (NFKC,
invisible characters removed).  Terms that overlap ("Mary Ann", "Ann Lee" in "Mary Ann
Lee") are one finding.  Unlike the recognizers that read line by line, this one reads
the whole text, so a term split over two lines is one finding.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from assistant.base.textform import SPACED_WORD, view, word_char
from assistant.privacy.findings import Finding

ENTITY = "DENY_LIST"


def _pattern(words: tuple[str, ...]) -> str:
    """``words`` joined by any whitespace, with an edge where a spaced-script word
    would otherwise go on."""
    left = f"(?<!{SPACED_WORD})" if word_char(words[0][0]) else ""
    right = f"(?!{SPACED_WORD})" if word_char(words[-1][-1]) else ""
    return left + r"\s+".join(map(re.escape, words)) + right


class TermList:
    """Finds any of ``terms`` (reported as ``recognizer``); one compiled pattern, tried
    at every position (so that overlapping terms are all seen), the longest first."""

    def __init__(self, terms: Iterable[str], recognizer: str, entity: str = ENTITY) -> None:
        self.recognizer, self.entity = recognizer, entity
        words = {tuple(view(t).text.split()) for t in terms}
        words.discard(())
        self.terms = tuple(sorted(" ".join(w) for w in words))
        ordered = sorted(words, key=lambda w: (-sum(map(len, w)), w))
        self._each = [_pattern(w) for w in ordered]
        self._pattern = (
            re.compile(f"(?=({'|'.join(self._each)}))", re.IGNORECASE) if ordered else None
        )

    def find(self, text: str, allow: Sequence[str] = ()) -> list[Finding]:
        """Each term in ``text`` (overlapping ones merged); one the user allowed, as
        written, is left."""
        if self._pattern is None:
            return []
        spans: list[list[int]] = []
        for m in self._pattern.finditer(text):
            start, end = m.span(1)
            if m.group(1) in allow:  # the longest term here is allowed: a shorter one?
                shorter = self._shorter(text, start, allow)
                if shorter is None:
                    continue
                end = shorter
            if spans and start < spans[-1][1]:
                spans[-1][1] = max(spans[-1][1], end)
            else:
                spans.append([start, end])
        return [Finding(self.entity, a, b, text[a:b], 1.0, self.recognizer) for a, b in spans]

    def _shorter(self, text: str, start: int, allow: Sequence[str]) -> int | None:
        """The end of the longest term at ``start`` that is not allowed (rare: only when
        the longest one there is), or None."""
        for pattern in self._each:
            m = re.compile(pattern, re.IGNORECASE).match(text, start)
            if m is not None and m.group() not in allow:
                return m.end()
        return None
