"""The words of a question, as the retrievers read them: stop-words, n-grams, and the
words that flip a question's meaning (negations, contrasts)."""

from __future__ import annotations

import re
from collections.abc import Sequence


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


NEGATIONS = _wordset(
    """not no never none nor neither cannot without except unless false incorrect untrue
    impossible unlikely"""
)
CONTRASTS = _wordset(
    """most least more less fewer fewest greater greatest smaller smallest larger largest
    higher highest lower lowest best worst maximum minimum increase increases increased
    decrease decreases decreased before after above below first last true correct
    always only all"""
)
STOPWORDS = _wordset(
    """a an the of to in on at by for with from and or but if then than that this these those
    is are was were be been being do does did has have had it its which what who whom whose
    when where why how there their they them he she his her we you your i my our as into
    about over under can could would should may might will shall so such each any some
    question answer following options option"""
)
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def words(text: str) -> list[str]:
    """Lower-case words, ``n't`` read as ``not``."""
    return _WORD.findall(text.casefold().replace("n't", " not"))


def ngrams(text: str, sizes: Sequence[int] = (1, 2, 3)) -> list[str]:
    """Word n-grams without stop-words (a stop-word breaks a phrase), in first-seen order."""
    runs: list[list[str]] = [[]]
    for w in words(text):
        if w in STOPWORDS or len(w) < 2:
            runs.append([])
        else:
            runs[-1].append(w)
    seen: dict[str, None] = {}
    for run in runs:
        for n in sizes:
            for i in range(len(run) - n + 1):
                seen.setdefault(" ".join(run[i : i + n]), None)
    return list(seen)
