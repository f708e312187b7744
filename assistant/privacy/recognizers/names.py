"""Rules that start from the names already found: the rest of a list or a dialogue, a
first name typed in lower case before one, a short surname after one, and a firm that a
personal pronoun shows to be a person.  Each is set from its section of ``policy.yaml``."""

from __future__ import annotations

import bisect
import dataclasses
import functools
import itertools
import re
from dataclasses import dataclass
from typing import Any

from assistant.privacy.findings import Finding
from assistant.privacy.recognizers.common import Scan, sentence_span

# One space, then a word with no capital after its first letter (ShortSurnameRule).
_SHORT_WORD_AFTER = re.compile(r" ([^\W\d_][^\W\d_A-Z]{1,7})(?![\w'’-])")
# A lower-case word, then one space, at the end of the text searched (GivenNameRule).
_WORD_BEFORE = re.compile(r"(?<![\w'-])([a-z][a-z'-]*[a-z]) $")
_ITEM = r"[^\W\d_][^\W\d_'’-]*"
_NAME_LIST = re.compile(
    rf"(?<![\w'’-]){_ITEM}(?:,\s*{_ITEM}){{1,}},?\s+(?:and|&)\s+{_ITEM}"
    rf"|(?<![\w'’-]){_ITEM}(?:,\s*{_ITEM}){{2,}}"
)
_LIST_ITEM = re.compile(_ITEM)
_SPEAKER = re.compile(rf"[^\S\n]*({_ITEM}(?: {_ITEM})?)[^\S\n]*:[^\S\n]*\S")


@dataclass(frozen=True)
class GivenNameRule:
    """A first name typed in lower case right before a name that was found ("include my
    demone Johnson"): a word the model's vectors do not know in lower case, and know
    capitalised or not at all with ``min_letters``+ letters, joins the name."""

    entity: str = ""
    min_letters: int = 4

    def names(self, vocab: Any, word: str) -> bool:
        if vocab.has_vector(word):
            return False
        return vocab.has_vector(word.capitalize()) or len(word) >= self.min_letters

    def find(self, scan: Scan, found: list[Finding]) -> list[Finding]:
        if not self.entity:
            return []
        longer = []
        for f in found:
            if f.entity != self.entity or not f.text[:1].isupper():
                continue
            m = _WORD_BEFORE.search(scan.text, 0, f.start)
            if m is None or not self.names(scan.vocab, m.group(1)) or scan.allowed(m.group(1)):
                continue
            value = scan.text[m.start(1) : f.end]
            if scan.accepts(self.entity, value, f.score):
                longer.append(Finding(self.entity, m.start(1), f.end, value, f.score, "GivenName"))
        return longer


@dataclass(frozen=True)
class ShortSurnameRule:
    """A name found, followed by a capitalised word of two or three letters that spaCy
    left out ("Jisoo An", "Sarah Oh", "Minh Le"): the short word is the name's surname
    and joins it (then the vault and the guard protect it as written)."""

    entity: str = ""
    max_letters: int = 3

    def find(self, scan: Scan, found: list[Finding]) -> list[Finding]:
        if not self.entity:
            return []
        longer = []
        for f in found:
            if f.entity != self.entity or not f.text[:1].isupper():
                continue
            m = _SHORT_WORD_AFTER.match(scan.text, f.end)
            if m is None:
                continue
            word, end = m.group(1), m.end(1)
            if not word[:1].isupper() or len(word) > self.max_letters or scan.allowed(word):
                continue
            value = scan.text[f.start : end]
            if scan.accepts(self.entity, value, f.score):
                longer.append(Finding(self.entity, f.start, end, value, f.score, "ShortSurname"))
        return longer


@dataclass(frozen=True)
class NameListRule:
    """In a list of capitalised words ("Efimiya, Mary, Ariana and Jodi") where at least
    ``min_known`` items, and at least half, are already ``entity``, the rest are too."""

    entity: str = ""
    min_known: int = 2
    score: float = 0.6

    def find(self, scan: Scan, found: list[Finding]) -> list[Finding]:
        if not self.entity:
            return []
        known = [f for f in found if f.entity == self.entity]
        added = []
        for offset, line in scan.lines:
            for m in _NAME_LIST.finditer(line):
                items = [
                    (offset + m.start() + i.start(), i.group())
                    for i in _LIST_ITEM.finditer(m.group())
                    if i.group() != "and"
                ]
                if not all(text[0].isupper() for _, text in items):
                    continue
                hit = [
                    any(f.start < start + len(text) and start < f.end for f in known)
                    for start, text in items
                ]
                if sum(hit) < self.min_known or 2 * sum(hit) < len(items):
                    continue
                added += [
                    Finding(self.entity, start, start + len(text), text, self.score, "NameList")
                    for (start, text), h in zip(items, hit, strict=True)
                    if not h and not scan.allowed(text)
                ]
        return added


@dataclass(frozen=True)
class SpeakerRule:
    """The labels of a dialogue ("Halldór: What a wife." / "Matthew: Remember me?"):
    where at least ``min_known`` of the labels that open two or more lines were found as
    ``entity``, the others are too."""

    entity: str = ""
    min_known: int = 1
    not_names: tuple[str, ...] = ()  # labels of forms and transcripts: "Question", "Phone"
    score: float = 0.6

    def find(self, scan: Scan, found: list[Finding]) -> list[Finding]:
        if not self.entity:
            return []
        labels = []  # (start, text)
        for offset, line in scan.lines:
            m = _SPEAKER.match(line)
            if m:
                labels.append((offset + m.start(1), m.group(1)))
        if len({text.casefold() for _, text in labels}) < 2:
            return []
        known_names = {f.text.casefold() for f in found if f.entity == self.entity}
        known = {text.casefold() for _, text in labels} & known_names
        if len(known) < self.min_known:
            return []
        return [
            Finding(self.entity, start, start + len(text), text, self.score, "Speaker")
            for start, text in labels
            if text.casefold() not in known
            and text.casefold() not in self.not_names
            and not scan.allowed(text)
        ]


@dataclass(frozen=True)
class PronounRule:
    """A finding of one of ``organisations`` made of 2 to ``max_words`` capitalised words,
    that spaCy alone found, followed in its sentence by one of ``pronouns``, with no
    ``entity`` found in that sentence ("Why has Caroline Regis been successful in her
    career?"): a person's name that spaCy read as a firm's, taken as ``entity``."""

    entity: str = ""
    organisations: tuple[str, ...] = ()
    pronouns: tuple[str, ...] = ()
    max_words: int = 3
    score: float = 0.6

    @functools.cached_property
    def _pronoun(self) -> re.Pattern[str] | None:
        if not self.pronouns:
            return None
        return re.compile(r"\b(?:" + "|".join(map(re.escape, self.pronouns)) + r")\b", re.I)

    def find(self, scan: Scan, found: list[Finding]) -> list[Finding]:
        pronoun, text = self._pronoun, scan.text
        if not self.entity or pronoun is None:
            return []
        people = [f for f in found if f.entity == self.entity]
        out = []
        for f in found:
            words = f.text.split()
            if (
                f.entity not in self.organisations
                or f.recognizer != "SpacyRecognizer"
                or not 2 <= len(words) <= self.max_words
                or not all(w[:1].isupper() and w[1:].islower() for w in words)
            ):
                continue
            start, end = sentence_span(text, f.start, f.end)
            alone = not any(start <= p.start < end for p in people)
            if (
                alone
                and pronoun.search(text, f.end, end)
                and scan.accepts(self.entity, f.text, self.score)
            ):
                out.append(dataclasses.replace(f, entity=self.entity, recognizer="Pronoun"))
        return out


_VALUE_WORD = re.compile(r"[^\W\d_]+")
_URL_HEAD = re.compile(r"^(?:[a-z][\w+.-]*://)?[^/?#]*", re.IGNORECASE)


@dataclass(frozen=True)
class ValuePartRule:
    """A name inside a value that was found is a name wherever else the text writes it
    (issue 48): the words of an e-mail's local part (split on dots, underscores,
    hyphens and digits), of a user name or a user folder, and of a link's path (its
    domain aside).  A word of ``min_letters``+ letters found elsewhere on its own, in any
    case when the model's vectors do not know it ("kowalska"), is taken as ``entity``;
    a word they know only when an e-mail or a user name holds it and the text writes it
    capitalised, not at a sentence's start ("Anna" after anna.kowalska@…; "Support" of
    support@… opening a sentence is no name).  The value itself is replaced whole
    already; this hides the rest of the name."""

    entity: str = ""
    values: tuple[str, ...] = ()
    min_letters: int = 4
    score: float = 0.6

    def _words(self, f: Finding) -> list[str]:
        text = f.text
        if "@" in text and not text.startswith("@"):
            text = text.split("@", 1)[0]  # an e-mail's local part
        elif f.entity == "URL":
            text = _URL_HEAD.sub("", text)  # the path: the domain is a site's
        return [w for w in _VALUE_WORD.findall(text) if len(w) >= self.min_letters]

    def find(self, scan: Scan, found: list[Finding]) -> list[Finding]:
        if not self.entity or not self.values:
            return []
        words: dict[str, bool] = {}  # word -> from an e-mail or a user name
        for f in found:
            if f.entity in self.values:
                for w in self._words(f):
                    words[w.casefold()] = words.get(w.casefold(), False) or f.entity != "URL"
        if not words:
            return []
        # The findings by start, with the furthest end reached so far: whether a word
        # stands inside one is a binary search, not a look at each (linear in the text).
        taken = sorted((f.start, f.end) for f in found)
        starts = [start for start, _end in taken]
        reach = list(itertools.accumulate((end for _start, end in taken), max))
        text = scan.text
        out = []
        for m in _VALUE_WORD.finditer(text):
            word = m.group()
            key = word.casefold()
            if key not in words:
                continue
            i = bisect.bisect_right(starts, m.start()) - 1
            if i >= 0 and reach[i] > m.start():
                continue
            if scan.vocab.has_vector(word.lower()):
                at = m.start()  # the last character before it, spaces and tabs aside
                while at > 0 and text[at - 1] in " \t":
                    at -= 1
                opening = at == 0 or text[at - 1] in '.!?:;\n"“'
                if not (words[key] and word[:1].isupper() and not opening):
                    continue
            if scan.allowed(word):
                continue
            if scan.accepts(self.entity, word, self.score):
                out.append(Finding(self.entity, m.start(), m.end(), word, self.score, "ValuePart"))
        return out
