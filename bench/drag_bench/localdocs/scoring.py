"""Score a reply against a LiHuaWorld gold answer: deterministic, and written apart from
the code it judges (it imports nothing from ``assistant``: the product's "not in your
files" sentence is not looked up here, only phrases a reader would take as "the chats
do not tell").

- **Null** questions (gold "Insufficient information"): right when the reply says the
  files or chats do not tell (:data:`ABSTAIN`).
- **Yes/no** golds: right when the reply's first yes or no agrees.
- **Others**: right when the reply holds enough of the gold's content words
  (:func:`needed`: all of one or two, else 60 %), compared after case, punctuation, a
  plural or past-tense ending, number words ("two" = "2") and names written joined
  ("YurikoYamamoto") are set aside.  The user's own name (LiHua, in every chat of
  the set) is not a content word.

A reply that abstains on a question with an answer is wrong but not an *error*: the
error rate counts wrong answers that claim something (MiniRAG's "err").
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

ABSTAIN = re.compile(
    r"(?i)\b(?:do(?:es)?\s*n[o']t\s+(?:say|tell|mention|specify|contain|provide|include|state)"
    r"|(?:is|are)\s+not\s+(?:mentioned|specified|stated|provided|given|included|available)"
    r"|not\s+in\s+(?:your|the)\s+(?:files|chats|excerpts|messages)"
    r"|no\s+(?:information|mention|record|details?)\b"
    r"|(?:can\s*not|can't|cannot|unable\s+to)\s+(?:find|determine|tell|answer|say)"
    r"|insufficient\s+information|not\s+enough\s+information|unknown)"
)
_YES_NO = re.compile(r"(?i)\b(yes|no)\b")
_WORD = re.compile(r"[a-z0-9]+")
_JOINED = re.compile(r"(?<=[a-z])(?=[A-Z])")
_STOP_WORDS = """a an the of to in on at by for with from and or but if then than that this
these those is are was were be been being do does did has have had it its which what who
whom whose when where why how there their they them he she his her him we you your i my
our me as into about over under can could would should may might will shall so such each
any some very really just also too not no yes up out off own lihua li hua"""
STOP = frozenset(_STOP_WORDS.split())
NUMBERS = {
    "one": "1",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "ten": "10",
    "eleven": "11",
    "twelve": "12",
    "first": "1",
    "second": "2",
    "third": "3",
    "once": "1",
    "twice": "2",
}


def _stem(word: str) -> str:
    word = NUMBERS.get(word, word)
    for end in ("ies", "es", "s", "ed", "ing"):
        if len(word) > len(end) + 2 and word.endswith(end):
            return word[: -len(end)] + ("y" if end == "ies" else "")
    return word


def content_words(text: str) -> list[str]:
    text = _JOINED.sub(" ", text)  # "YurikoYamamoto" is "Yuriko Yamamoto"
    words = _WORD.findall(text.casefold().replace("’", "'").replace("'s", ""))
    return list(dict.fromkeys(_stem(w) for w in words if w not in STOP))


def needed(count: int) -> int:
    return count if count <= 2 else math.ceil(0.6 * count)


def is_null(gold: str, kind: str) -> bool:
    return kind.strip().casefold() == "null" or "insufficient information" in gold.casefold()


def abstains(reply: str) -> bool:
    return ABSTAIN.search(reply) is not None


@dataclass(frozen=True)
class Verdict:
    right: bool
    abstained: bool
    how: str  # "null" | "yes-no" | "words"
    matched: int = 0
    wanted: int = 0

    @property
    def error(self) -> bool:
        """Wrong and claiming an answer (not an abstention)."""
        return not self.right and not self.abstained


def score(reply: str, gold: str, kind: str) -> Verdict:
    quiet = abstains(reply)
    if is_null(gold, kind):
        return Verdict(quiet, quiet, "null")
    verdict = _YES_NO.match(gold.strip())
    if verdict and len(gold.split()) <= 3:
        said = _YES_NO.search(reply)
        right = said is not None and said.group(1).casefold() == verdict.group(1).casefold()
        return Verdict(right and not quiet, quiet, "yes-no")
    wanted = content_words(gold)
    have = set(content_words(reply))
    matched = sum(1 for w in wanted if w in have)
    right = bool(wanted) and matched >= needed(len(wanted)) and not quiet
    return Verdict(right, quiet, "words", matched, len(wanted))
