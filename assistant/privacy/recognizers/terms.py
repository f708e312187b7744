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


def _edges(words: tuple[str, ...]) -> tuple[bool, bool]:
    """Whether the term needs an edge before it and after it (its first and last
    characters are letters or digits of a spaced script)."""
    return word_char(words[0][0]), word_char(words[-1][-1])


def _pattern(words: tuple[str, ...]) -> str:
    """``words`` joined by any whitespace, with an edge where a spaced-script word
    would otherwise go on."""
    left, right = _edges(words)
    return _edged(r"\s+".join(map(re.escape, words)), left, right)


def _capitalised(term: str) -> str:
    return " ".join(w[:1].upper() + w[1:] for w in term.split())


def _edged(body: str, left: bool, right: bool) -> str:
    return (f"(?<!{SPACED_WORD})" if left else "") + body + (f"(?!{SPACED_WORD})" if right else "")


class TermList:
    """Finds any of ``terms`` (reported as ``recognizer``), tried at every position (so
    that overlapping terms are all seen), the longest first.  Terms are compiled in at
    most four patterns, one per kind of edge, each edge written once: an edge class
    per term made a thousand learnt names cost nine seconds to compile."""

    def __init__(
        self, terms: Iterable[str], recognizer: str, entity: str = ENTITY, *, cased: bool = False
    ) -> None:
        """``cased``: each term only as a name is written (as typed, capitalised or in
        capitals: "Will", "WILL", not "will"), for names that are everyday words."""
        self.recognizer, self.entity = recognizer, entity
        self._flags = 0 if cased else re.IGNORECASE
        if cased:
            terms = {f for t in terms for f in (t, t.upper(), _capitalised(t))}
        words = {tuple(view(t).text.split()) for t in terms}
        words.discard(())
        self.terms = tuple(sorted(" ".join(w) for w in words))
        ordered = sorted(words, key=lambda w: (-sum(map(len, w)), w))
        self._ordered = ordered
        groups: dict[tuple[bool, bool], list[str]] = {}
        for w in ordered:
            groups.setdefault(_edges(w), []).append(r"\s+".join(map(re.escape, w)))
        self._patterns = [
            re.compile(f"(?=({_edged('(?:' + '|'.join(bodies) + ')', *edges)}))", self._flags)
            for edges, bodies in sorted(groups.items())
        ]

    def find(self, text: str, allow: Sequence[str] = ()) -> list[Finding]:
        """Each term in ``text`` (overlapping ones merged); one the user allowed, as
        written, is left."""
        longest: dict[int, int] = {}  # start -> the end of the longest term there
        for pattern in self._patterns:
            for m in pattern.finditer(text):
                start, end = m.span(1)
                if m.group(1) in allow:  # the longest term here is allowed: a shorter one?
                    shorter = self._shorter(text, start, allow)
                    if shorter is None:
                        continue
                    end = shorter
                longest[start] = max(end, longest.get(start, end))
        spans: list[list[int]] = []
        for start, end in sorted(longest.items()):
            if spans and start < spans[-1][1]:
                spans[-1][1] = max(spans[-1][1], end)
            else:
                spans.append([start, end])
        return [Finding(self.entity, a, b, text[a:b], 1.0, self.recognizer) for a, b in spans]

    def _shorter(self, text: str, start: int, allow: Sequence[str]) -> int | None:
        """The end of the longest term at ``start`` that is not allowed (rare: only when
        the longest one there is), or None."""
        for words in self._ordered:
            m = re.compile(_pattern(words), self._flags).match(text, start)
            if m is not None and m.group() not in allow:
                return m.end()
        return None
