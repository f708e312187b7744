"""The words of a question, as the retrievers read them: stop-words, n-grams, and the
words that flip a question's meaning (negations, contrasts)."""

from __future__ import annotations

import re
from collections.abc import Sequence


def wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


NEGATIONS = wordset(
    """not no never none nor neither cannot without except unless false incorrect untrue
    impossible unlikely"""
)
CONTRASTS = wordset(
    """most least more less fewer fewest greater greatest smaller smallest larger largest
    higher highest lower lowest best worst maximum minimum increase increases increased
    decrease decreases decreased before after above below first last true correct
    always only all"""
)
STOPWORDS = wordset(
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


_KEYWORD = re.compile(r"[^\W_]+")


def keywords(text: str) -> list[str]:
    """Lower-case words of any script, stop-words left out: the files' keyword search
    (BM25), the passages' cut and the answer's support read a text so."""
    return [w for w in _KEYWORD.findall(text.casefold()) if w not in STOPWORDS]


def stem(word: str) -> str:
    """A word without its plural, possessive, past or -ing ending ("snacks", "snack's"
    -> "snack"; "asked" -> "ask"; "renovating" -> "renovat"), for matching a question's
    words in a passage; a short word is kept as it is ("bus", "is", "red", "king")."""
    if word.endswith("'s"):
        word = word[:-2]
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ied"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith("ed") and not word.endswith("eed"):
        return word[:-2]
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("ches", "shes", "sses", "xes")):
        return word[:-2]
    if len(word) > 4 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


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
