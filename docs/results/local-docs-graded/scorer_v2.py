"""words-v2, the scorer's second version: tried (scorer-v2-rule.txt) and not kept.

Built on the benchmark's scorer (drag_bench.localdocs.scoring, words-v1), which it
changes in four rules: a day is one word however it is written, its time of day not
asked (R1); a gold list joined by "&" is right when more than half of its items are
(R2); the gold's words that the question already holds are not asked (R3); a gold that
is only the user's name asks for it (R4).  Its verdicts are those of the version committed in
83a2052 (and taken back: docs/benchmarks.md, "Two graders read the replies") on every
stored files reply.
"""

from __future__ import annotations

import re

from drag_bench.localdocs.scoring import (
    _YES_NO,
    Verdict,
    abstains,
    content_words,
    is_null,
    needed,
)
from drag_bench.localdocs.scoring import score as words_v1

_USER = re.compile(r"(?i)li\s*hua")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_MONTH = (
    r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_DAY_OF = r"(\d{1,2})(?:st|nd|rd|th)?"
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
    return content_words(_DAY.sub(_one_day, text))


def _wanted(gold: str, question: str) -> list[str]:
    asked = set(_words(question))
    wanted = _words(gold)
    return [w for w in wanted if w not in asked] or wanted


def _enough(have: set[str], wanted: list[str]) -> bool:
    return bool(wanted) and sum(1 for w in wanted if w in have) >= needed(len(wanted))


def score(reply: str, gold: str, kind: str, question: str) -> Verdict:
    if is_null(gold, kind) or (_YES_NO.match(gold.strip()) and len(gold.split()) <= 3):
        return words_v1(reply, gold, kind)  # a Null or a yes/no gold: as words-v1
    quiet = abstains(reply)
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
