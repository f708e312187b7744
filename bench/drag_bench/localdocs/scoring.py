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

Since ``words-v2`` (:data:`SCORER`; chosen by agreement with blind graders,
docs/results/local-docs-graded):

- a **day** is one word however it is written ("20260209", "2026-02-09", "February 9,
  2026", "Feb 9th", "the 9th of February"): its month and day; a gold's time of day
  ("20260223_19:00") is not asked;
- a gold **list** of items joined by "&" is right when more than half of its items are;
- the gold's words that the **question** already holds are not asked of the reply
  (unless no word would be left): "on Friday evening" is the answer to "What day do they
  plan to visit the exhibition?", not the gold's restated question;
- a gold that is only the user's name asks for that name.

``words-v1`` (every run stored before 2026-12-06) is kept: a stored run is recounted by
the scorer that scored it.

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
SCORER = "words-v2"
SCORERS = ("words-v1", "words-v2")
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


def score(reply: str, gold: str, kind: str, question: str, *, scorer: str = SCORER) -> Verdict:
    """The verdict on ``reply`` by ``scorer`` (one of :data:`SCORERS`; ``words-v1`` reads
    no ``question``)."""
    if scorer not in SCORERS:
        raise ValueError(f"no scorer {scorer!r}: one of {', '.join(SCORERS)}")
    quiet = abstains(reply)
    if is_null(gold, kind):
        return Verdict(quiet, quiet, "null")
    verdict = _YES_NO.match(gold.strip())
    if verdict and len(gold.split()) <= 3:
        said = _YES_NO.search(reply)
        right = said is not None and said.group(1).casefold() == verdict.group(1).casefold()
        return Verdict(right and not quiet, quiet, "yes-no")
    if scorer == "words-v1":
        have, wanted = set(content_words(reply)), content_words(gold)
    else:
        have = set(_words(reply))
        if not _words(gold) and _USER.search(gold):
            right = _USER.search(reply) is not None and not quiet
            return Verdict(right, quiet, "name")
        items = [part for part in gold.split("&") if _words(part)]
        if len(items) > 1:
            got = sum(_enough(have, _wanted(part, question)) for part in items)
            return Verdict(2 * got > len(items) and not quiet, quiet, "list", got, len(items))
        wanted = _wanted(gold, question)
    matched = sum(1 for w in wanted if w in have)
    return Verdict(_enough(have, wanted) and not quiet, quiet, "words", matched, len(wanted))


def _wanted(gold: str, question: str) -> list[str]:
    """The gold's words that a reply must hold: those the question does not already hold
    (all of them when the question holds every one)."""
    asked = set(_words(question))
    wanted = _words(gold)
    return [w for w in wanted if w not in asked] or wanted


def _enough(have: set[str], wanted: list[str]) -> bool:
    return bool(wanted) and sum(1 for w in wanted if w in have) >= needed(len(wanted))


_USER = re.compile(r"(?i)li\s*hua")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_MONTH = (
    r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_DAY_OF = r"(\d{1,2})(?:st|nd|rd|th)?"
# A day as the gold or a reply writes it: 20260209 (its time after "_" too), 2026-02-09
# or 2026/02/09, "February 9(, 2026)", "(the) 9(th) (of) February (2026)".
_DAY = re.compile(
    r"(?i)(?<!\d)(20\d\d)(\d\d)(\d\d)(?:_\d{1,2}:\d\d)?(?!\d)"
    r"|(?<!\d)(20\d\d)[-/](\d{1,2})[-/](\d{1,2})(?!\d)"
    rf"|\b{_MONTH}\.?\s+{_DAY_OF}\b(?:,?\s+(20\d\d)\b)?"
    rf"|\b(?:the\s+)?{_DAY_OF}\s+(?:of\s+)?{_MONTH}\b(?:,?\s+(20\d\d)\b)?"
)


def _one_day(m: re.Match[str]) -> str:
    g = m.groups()
    if g[0]:
        month, day = int(g[1]), int(g[2])
    elif g[3]:
        month, day = int(g[4]), int(g[5])
    elif g[6]:
        month, day = _MONTHS.index(g[6][:3].casefold()) + 1, int(g[7])
    else:
        month, day = _MONTHS.index(g[10][:3].casefold()) + 1, int(g[9])
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return m.group()
    return f" day{month:02d}{day:02d} "


def _words(text: str) -> list[str]:
    """:func:`content_words`, each day one word (``day0209``)."""
    return content_words(_DAY.sub(_one_day, text))
