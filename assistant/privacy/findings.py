"""What a reader of text finds: :class:`Finding`, anything that finds them
(:class:`Scanner`), and how overlapping findings are settled."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Finding:
    entity: str  # Presidio entity type, e.g. PERSON, EMAIL_ADDRESS
    start: int
    end: int
    text: str
    score: float
    recognizer: str = ""


class Scanner(Protocol):
    """Anything that finds personal data (the detector, or a test's fault injector)."""

    def find(self, text: str) -> list[Finding]: ...


# Findings that guess a kind rather than know it: spaCy's, and the rare-word rule's "a
# name of some kind".  A rule's finding beats them on the same span.
_GUESSES = frozenset({"SpacyRecognizer", "RareWord"})


def resolve_overlaps(findings: Sequence[Finding]) -> list[Finding]:
    """Non-overlapping findings: the longest span wins, then a rule's finding over a
    guess ("my kid Selma": a name, though spaCy says a town), then the higher score.

    The rare-word rule is a guess too: "Mrs. Dipert" is a PERSON, whether Presidio,
    which keeps one of two equal results on a span, reports the title rule or spaCy."""
    chosen: list[Finding] = []

    def rank(f: Finding) -> tuple[int, bool, float, int]:
        return (-(f.end - f.start), f.recognizer in _GUESSES, -f.score, f.start)

    for f in sorted(findings, key=rank):
        if all(f.end <= c.start or f.start >= c.end for c in chosen):
            chosen.append(f)
    return sorted(chosen, key=lambda f: f.start)
