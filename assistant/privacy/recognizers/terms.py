"""The user's own terms: ``privacy.deny`` and the names learnt from their indexed files.

A term is found in any case and whatever space separates its words: spaces, a tab or
a line break ("Wolfgang\\nSchulz" in a pasted, wrapped e-mail is the name), never inside
a longer word.  Unlike the recognizers that read line by line, this one reads the whole
text, so a term split over two lines is one finding.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from assistant.privacy.findings import Finding

ENTITY = "DENY_LIST"


class TermList:
    """Finds any of ``terms`` (reported as ``recognizer``); one compiled pattern, the
    longest term tried first."""

    def __init__(self, terms: Iterable[str], recognizer: str) -> None:
        self.recognizer = recognizer
        words = {tuple(t.split()) for t in terms}
        words.discard(())
        self.terms = tuple(sorted(" ".join(w) for w in words))
        ordered = sorted(words, key=lambda w: (-sum(map(len, w)), w))
        alternatives = [r"\s+".join(map(re.escape, w)) for w in ordered]
        self._pattern = (
            re.compile(rf"(?<!\w)(?:{'|'.join(alternatives)})(?!\w)", re.IGNORECASE)
            if alternatives
            else None
        )

    def __bool__(self) -> bool:
        return self._pattern is not None

    def find(self, text: str, allow: Sequence[str] = ()) -> list[Finding]:
        """Each term in ``text``; one the user allowed, as written, is left."""
        if self._pattern is None:
            return []
        return [
            Finding(ENTITY, m.start(), m.end(), m.group(), 1.0, self.recognizer)
            for m in self._pattern.finditer(text)
            if m.group() not in allow
        ]
