"""What several rules read text with: answer options, unknown words, scripts, lists."""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# "A. " / "(B) " at the start of a line: an answer option's label, which spaCy's
# models read as a person's initial ("A. Oxygen" -> PERSON).
OPTION_LABEL = re.compile(r"\(?[A-Z1-9][.)]\s")


def option_label(line: str) -> re.Match[str] | None:
    """The answer option's label ("A. ") that opens ``line``, after its indent."""
    return OPTION_LABEL.match(line, len(line) - len(line.lstrip()))


def unknown(vocab: Any, word: str, min_letters: int) -> bool:
    """A capitalised word of ``min_letters``+ letters that the model's vectors know in no
    case ("Xignite", "Exversion").  Not a word in capitals or with capitals inside
    ("FAUSKE", "BbEe", "DCGANs"): spaCy's tag for those changes with the words around
    them, and codes are not names."""
    return (
        len(word) >= min_letters
        and word[:1].isupper()
        and not word[1:2].isupper()
        and not vocab.has_vector(word)
        and not vocab.has_vector(word.lower())
    )


# A run of letters of one kind: Latin ones, or letters of other scripts with the marks
# that join them (vowel signs and points are not letters to str.isalpha): the combining
# diacritics, Cyrillic's, Hebrew's and Arabic's marks, every Indic block from Devanagari
# to Sinhala, Thai, Lao, Tibetan, Myanmar, Khmer, and kana's voicing marks.
_MARKS = (
    "\u0300-\u036f\u0483-\u0489\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0670"
    "\u06d6-\u06ed\u0900-\u0dff\u0e00-\u0fff\u1000-\u109f\u1780-\u17ff\u3099\u309a"
)
LETTER_RUN = re.compile(rf"[^\W\d_](?:[^\W\d_]|[{_MARKS}])*")


def latin(ch: str) -> bool:
    """A letter of the Latin script (ª, µ and º of Latin-1 included)."""
    return ch.isascii() or "\u00aa" <= ch <= "\u024f" or "\u1e00" <= ch <= "\u1eff"


def greek(ch: str) -> bool:
    return "\u0370" <= ch <= "\u03ff" or "\u1f00" <= ch <= "\u1fff"


# Up to this many letters in a row, letters styled as mathematics or units are symbols.
_SYMBOL_LETTERS = 3


def symbols(run: str) -> bool:
    """Whether ``run`` is one to three Latin or Greek letters in a styled form: a
    mathematical symbol (𝑥, ℎ, 𝜈, ℓ, 𝑚𝑐), not text of another script.  A longer styled
    run (a name written in a decorative font, "𝓜𝓪𝓻𝔂") is not: nothing here reads it."""
    if len(run) > _SYMBOL_LETTERS or latin(run[0]) or greek(run[0]):
        return False
    plain = unicodedata.normalize("NFKC", run)
    return len(plain) == len(run) and all(
        ch.isalpha() and (ch.isascii() or greek(ch)) for ch in plain
    )


def sentence_span(text: str, start: int, end: int) -> tuple[int, int]:
    """Where the sentence holding ``text[start:end]`` begins and ends: after the last
    ".", "!", "?" or line break before it, up to the first one after it."""
    begins = max(text.rfind(c, 0, start) for c in ".!?\n") + 1
    ends = [i for i in (text.find(c, end) for c in ".!?\n") if i >= 0]
    return begins, min(ends, default=len(text))


# Of the model's word vectors, the rows of its most frequent words (the rows are in
# the order of frequency): a word that owns one, in lower case, is an everyday word.
EVERYDAY_ROWS = 5000


@functools.lru_cache(maxsize=2)  # one vocabulary per loaded model
def everyday_words(vocab: Any) -> frozenset[str]:
    """The words written in lower case that own one of the first :data:`EVERYDAY_ROWS`
    rows of the model's vectors ("string", "evidence", "dinner", "rose"; not "france",
    whose row is "France's"): with the stop words, no name is made of them alone."""
    own: dict[int, int] = {}  # row -> the key that owns it: the first one listed
    for key, row in vocab.vectors.key2row.items():
        own.setdefault(row, key)
    strings = vocab.strings
    frequent = {strings[key] for row, key in own.items() if row < EVERYDAY_ROWS and key in strings}
    return frozenset(w for w in frequent if w.isalpha() and w.islower())


# Every line break str.splitlines() knows, not only "\n".
_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_LINE_BREAK = re.compile(f"[{_BREAKS}]")


def line_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """The line of ``text`` that holds ``start``..``end``, as str.splitlines() cuts
    lines, without its break."""
    first = max(text.rfind(ch, 0, start) for ch in _BREAKS) + 1
    after = _LINE_BREAK.search(text, end)
    return first, after.start() if after else len(text)


def words_pattern(words: Sequence[str]) -> re.Pattern[str] | None:
    """Any of ``words`` as whole words, case-insensitive (None for no words)."""
    if not words:
        return None
    alt = "|".join(
        re.escape(w).replace("\\ ", r"\s+") for w in sorted(words, key=len, reverse=True)
    )
    return re.compile(rf"(?<![\w'’])(?:{alt})(?![\w'’])", re.IGNORECASE)


@functools.lru_cache(maxsize=4)  # asked once per finding of the same text
def subject_words(text: str, min_options: int = 2) -> frozenset[str]:
    """In a multiple-choice question (``min_options`` answer-option lines or more), the
    capitalised words that an option writes in lower case: terms of the subject, not
    obscure names ("False statement about Thyroglossal Duct cyst … A. Infected
    thyroglossal cyst").  The unknown-word rules leave them alone.  Only options count:
    in a user's own text a name and a login made of it ("Belal … belal is his login")
    stay a name.  (Written from a MedMCQA question that the guard refused in the accuracy
    benchmark's teacher pass, not from a privacy benchmark.)"""
    options = [line for line in text.splitlines() if option_label(line)]
    if len(options) < min_options:
        return frozenset()
    lower = {w for line in options for w in re.findall(r"[^\W\d_]+", line) if w.islower()}
    words = re.findall(r"[^\W\d_]+", text)
    return frozenset(w for w in words if w[:1].isupper() and w.lower() in lower)


@dataclass
class Scan:
    """One text as the rules read it: its lines with text, as (offset, line); the spaCy
    model's vocabulary; and the detector's judgement of a value (``accepts(entity,
    text, score)``: its entity rule passes it) and of the user's allow list."""

    text: str
    lines: list[tuple[int, str]]
    vocab: Any
    accepts: Callable[[str, str, float], bool]
    allowed: Callable[[str], bool]
