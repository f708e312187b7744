"""One normal form for every comparison the vault and the guard make.

A value typed twice may differ in ways a reader never sees: composed or
decomposed accents (``Kovács`` / ``Kova\\u0301cs``), compatibility forms
(full-width digits), case, a zero-width space or soft hyphen inside it, or a
line break in the middle.  :func:`normalise` removes all of these (NFKC,
case-folded, invisible characters dropped, whitespace collapsed), and
:func:`view` does the same while remembering where each character came from,
so a match in the normal form maps back to a span of the original text.

Digits are compared as digit runs across the separators numbers are written
with (:func:`digit_runs`), and dates as (year, month, day) whatever their
format (:func:`date_spans`).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass

# Format characters (zero-width space/joiners, soft hyphen, word joiner, BOM, bidi marks)
# are category Cf; a few invisible ones are not.
_EXTRA_INVISIBLE = {"\u034f", "\u115f", "\u1160", "\u3164", "\uffa0"}


def invisible(char: str) -> bool:
    return (
        unicodedata.category(char) == "Cf"
        or char in _EXTRA_INVISIBLE
        or (
            "\ufe00" <= char <= "\ufe0f"  # variation selectors
        )
    )


def normalise(text: str) -> str:
    """NFKC, case-folded, invisible characters removed, whitespace collapsed."""
    if not text.isascii():
        text = "".join(c for c in unicodedata.normalize("NFKC", text) if not invisible(c))
        text = unicodedata.normalize("NFKC", text.casefold())
    return " ".join(text.casefold().split())


@dataclass(frozen=True)
class View:
    """``text`` derived from an original; character ``i`` came from
    ``original[starts[i]:ends[i]]``."""

    text: str
    starts: tuple[int, ...]
    ends: tuple[int, ...]

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original span of ``text[start:end]`` (``end > start``)."""
        return self.starts[start], self.ends[end - 1]


# A line break inside a value: between digits ("DE89 3704 0044\n0532 ..."), after a digit
# group's separator ("536-22-\n8471"), or on either side of an e-mail's @.
_SPLIT_VALUE = re.compile(
    r"(?<=\d)([ \t]*\r?\n[ \t]*)(?=\d)"
    r"|(?<=\d[-./])([ \t]*\r?\n[ \t]*)(?=\d)"
    r"|(?<=\w@)([ \t]*\r?\n[ \t]*)(?=\w)"
    r"|(?<=\w)([ \t]*\r?\n[ \t]*)(?=@\w)"
)


def view(text: str, *, fold: bool = False, join_lines: bool = False) -> View:
    """``text`` in NFKC with invisible characters removed; ``fold``: also case-folded with
    whitespace collapsed (the form of :func:`normalise`); ``join_lines``: a line break
    inside a number or an e-mail address joined (for detection)."""
    n = len(text)
    if not fold and text.isascii() and not (join_lines and _SPLIT_VALUE.search(text)):
        # ASCII is its own NFKC and holds no invisible character: the view is the text.
        return View(text, tuple(range(n)), tuple(range(1, n + 1)))
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    i = 0
    while i < n:
        j = i + 1
        while j < n and unicodedata.combining(text[j]):
            j += 1
        cluster = "".join(c for c in text[i:j] if not invisible(c))
        out = unicodedata.normalize("NFKC", cluster) if not cluster.isascii() else cluster
        if fold:
            out = out.casefold()
            if not out.isascii():
                out = unicodedata.normalize("NFKC", out)
        for c in out:
            if fold and c.isspace():
                if chars and chars[-1] == " ":
                    ends[-1] = j
                    continue
                c = " "
            chars.append(c)
            starts.append(i)
            ends.append(j)
        i = j
    joined = "".join(chars)
    if join_lines:
        keep = [True] * len(chars)
        for m in _SPLIT_VALUE.finditer(joined):
            first, last = m.span(m.lastindex or 0)
            between_digits = m.lastindex == 1
            for k in range(first, last):
                keep[k] = False
            if between_digits:  # "0044\n0532" reads "0044 0532"
                keep[first] = True
                chars[first] = " "
        chars = [c for c, k in zip(chars, keep, strict=True) if k]
        starts = [s for s, k in zip(starts, keep, strict=True) if k]
        ends = [e for e, k in zip(ends, keep, strict=True) if k]
        joined = "".join(chars)
    return View(joined, tuple(starts), tuple(ends))


# Scripts written without spaces between words (Thai, Lao, Myanmar, Khmer, Chinese,
# Japanese) or with particles joined to names (Korean): a value in them has no edge.
UNSPACED = (
    (0x0E00, 0x0EFF),
    (0x1000, 0x109F),
    (0x1780, 0x17FF),
    (0x2E80, 0x9FFF),
    (0xAC00, 0xD7AF),
    (0xF900, 0xFAFF),
    (0xFF00, 0xFFEF),
)
# A letter or digit of a spaced script, as a regex class (what word_char says).
SPACED_WORD = "[^\\W_" + "".join(f"\\u{lo:04x}-\\u{hi:04x}" for lo, hi in UNSPACED) + "]"


def word_char(ch: str) -> bool:
    """A letter or digit that joins its neighbours into one word (not one of a script
    written without spaces, where a name has no edge)."""
    return ch.isalnum() and not any(lo <= ord(ch) <= hi for lo, hi in UNSPACED)


def bounded(needle: str) -> str:
    """A pattern for ``needle`` that does not match inside a longer word."""
    left = r"(?<!\w)" if needle[:1].isalnum() else ""
    right = r"(?!\w)" if needle[-1:].isalnum() else ""
    return left + re.escape(needle) + right


def folded(text: str | View) -> View:
    """``text``'s view in the normal form (a view already made is used as it is)."""
    return text if isinstance(text, View) else view(text, fold=True)


def find_folded(text: str | View, value: str) -> list[tuple[int, int]]:
    """Spans of ``text`` that read as ``value`` in the normal form (whole words)."""
    needle = normalise(value)
    if not needle:
        return []
    v = folded(text)
    return [v.span(*m.span()) for m in re.finditer(bounded(needle), v.text)]


_DIGIT_RUN = re.compile(r"\d(?:[\d\s().+/-]*\d)?")


@functools.cache
def _digit_table() -> dict[int, str]:
    """Every decimal digit of every script -> its ASCII digit (made once)."""
    return {
        c: str(unicodedata.decimal(chr(c)))
        for c in range(0x80, 0x110000)
        if unicodedata.category(chr(c)) == "Nd"
    }


def ascii_digits(text: str) -> str:
    """``text`` with the digits of every script written as ASCII digits ("५३६" ->
    "536"): digits compare by value whatever their script."""
    return text if text.isascii() else text.translate(_digit_table())


def digit_runs(flat: str) -> list[str]:
    """Digit sequences of normalised text, joined across the separators numbers are
    written with."""
    return [re.sub(r"\D", "", m.group(0)) for m in _DIGIT_RUN.finditer(flat)]


def digit_spans(text: str | View) -> list[tuple[int, int, str]]:
    """(start, end, digits) of each digit run of ``text`` (see :func:`digit_runs`)."""
    v = folded(text)
    return [
        (*v.span(*m.span()), re.sub(r"\D", "", m.group(0))) for m in _DIGIT_RUN.finditer(v.text)
    ]


# -- dates ---------------------------------------------------------------------------------

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
# A month by its first letters: "Sept.", "January", and other languages' names too
# ("marzo", "janvier": a birth date so written is the same date to the vault).
_MONTH = r"(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_DATES = (
    re.compile(r"(?<![\d/.-])(\d{1,4})([./-])(\d{1,2})\2(\d{1,4})(?![\d/.-]*\d)"),
    re.compile(rf"(?<!\w){_DAY}(?:\s+of)?\s+{_MONTH},?\s+(\d{{4}}|'\d\d)(?!\w)"),
    re.compile(rf"(?<!\w){_MONTH}\s+(?:the\s+)?{_DAY},?\s+(\d{{4}}|'\d\d)(?!\w)"),
)

Date = tuple[int, int, int]  # (year % 100, month, day): "85" and "1985" compare equal


def _date(year: str, month: int, day: int) -> set[Date]:
    y = int(year.lstrip("'"))
    return {(y % 100, month, day)} if 1 <= month <= 12 and 1 <= day <= 31 else set()


def date_spans(text: str | View) -> list[tuple[int, int, set[Date]]]:
    """(start, end, the dates it may mean) of each date written in ``text``; a numeric
    date whose order is unclear (03/04/1985) may mean two."""
    v = folded(text)
    out = []
    for m in _DATES[0].finditer(v.text):
        a, _, b, c = m.groups()
        if len(a) == 4:  # 1985-04-03
            dates = _date(a, int(b), int(c))
        elif len(c) in (2, 4):  # day/month or month/day
            dates = _date(c, int(b), int(a)) | _date(c, int(a), int(b))
        else:
            continue
        if dates:
            out.append((*v.span(*m.span()), dates))
    for m in _DATES[1].finditer(v.text):
        day, month, year = m.groups()
        if dates := _date(year, _MONTHS.index(month) + 1, int(day)):
            out.append((*v.span(*m.span()), dates))
    for m in _DATES[2].finditer(v.text):
        month, day, year = m.groups()
        if dates := _date(year, _MONTHS.index(month) + 1, int(day)):
            out.append((*v.span(*m.span()), dates))
    return out


# Eight digits alone, or before "_" (LiHuaWorld writes a chat's time "20260901_13:00").
_COMPACT_DATE = re.compile(r"(?<!\w)((?:19|20)\d\d)(\d\d)(\d\d)(?![^\W_])")


# The same, and the time after it ("20260901_13:00"): the whole stamp, to set aside.
_COMPACT_STAMP = re.compile(_COMPACT_DATE.pattern + r"(?:_\d{1,2}:\d\d(?!\d))?")


def day_spans(text: str, *, compact: bool = False) -> list[tuple[int, int]]:
    """(start, end) of each day :func:`dates_in` reads in ``text`` (with ``compact``, a
    compact day with its time after "_"), in order; spans that overlap are joined."""
    spans = sorted((start, end) for start, end, _ in date_spans(text))
    if compact:
        spans += [
            m.span()
            for m in _COMPACT_STAMP.finditer(text)
            if _date(m.group(1), int(m.group(2)), int(m.group(3)))
        ]
        spans.sort()
    joined: list[tuple[int, int]] = []
    for start, end in spans:
        if joined and start < joined[-1][1]:
            joined[-1] = (joined[-1][0], max(end, joined[-1][1]))
        else:
            joined.append((start, end))
    return joined


def dates_in(text: str, *, compact: bool = False) -> set[Date]:
    """The days ``text`` names (:func:`date_spans`); with ``compact``, also those
    written ``20260405`` (as LiHuaWorld's questions and chat exports write a day), for
    the files' search.  The privacy checks leave them out: eight digits of an ID
    would read as a day."""
    found = {d for _, _, dates in date_spans(text) for d in dates}
    if compact:
        for year, month, day in _COMPACT_DATE.findall(text):
            found |= _date(year, int(month), int(day))
    return found


_MONTH_NAME = (
    r"(january|february|march|april|may|june|july|august|september|october|november|december"
    r"|jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec)\.?"
)
# A month only as a name is written: these words, and every short form ("Jan 6", not
# "ask jan 6 things"; "Dec 24", not "dec 24" of a declination).
_ALSO_WORDS = ("may", "march", "august", *_MONTHS, "sept")
_NO_YEAR = r"(?!,?\s+(?:\d{4}|'\d\d)(?!\w))"
_YEARLESS = (
    re.compile(rf"(?<!\w){_MONTH_NAME}\s+(?:the\s+)?{_DAY}(?!\w){_NO_YEAR}"),
    re.compile(rf"(?<!\w)(?:the\s+)?{_DAY}\s+(?:of\s+)?{_MONTH_NAME}(?!\w){_NO_YEAR}"),
)


def month_days(text: str) -> set[tuple[int, int]]:
    """(month, day) of each day ``text`` names without a year ("January 6th", "the 6th
    of January", "Jan 6"), for the files' search: a question about a chat "on January
    6th" means that day of any year the files hold.  "May", "March", "August" and the
    short forms are months only capitalised ("you may 2 …" is not a day)."""
    v = folded(text)
    found: set[tuple[int, int]] = set()
    for form, (at_month, at_day) in zip(_YEARLESS, ((1, 2), (2, 1)), strict=True):
        for m in form.finditer(v.text):
            name, day = m.group(at_month), int(m.group(at_day))
            start, _ = v.span(*m.span(at_month))
            if name in _ALSO_WORDS and not text.startswith(name[0].upper(), start):
                continue  # "you may 2 …", "we march 3 miles": the verb, not the month
            if 1 <= day <= 31:
                found.add((_MONTHS.index(name[:3]) + 1, day))
    return found


def entity_key(name: str) -> str:
    """Normalised entity name: case, spacing, punctuation and a leading article ignored.

    The key of a teacher's concept in the cache's graph (triples merged per entity
    pair); it keeps ``+#*-`` ("C++", "C#").  A recognised name is keyed by
    :func:`assistant.privacy.entities.name_key`, which also splits CamelCase and drops
    a possessive; the files' search keys both sources' names with that one, so keys
    of the two kinds are never compared."""
    words = re.sub(r"[^\w\s*+#-]", " ", name.casefold()).split()
    if len(words) > 1 and words[0] in {"the", "a", "an"}:
        words = words[1:]
    return " ".join(words)
