"""Rules that read a text line by line: contact blocks, lines in lower case, names after
a cue, runs of another script.  Each is set from its section of ``policy.yaml``."""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from assistant.privacy.findings import Finding
from assistant.privacy.recognizers.common import (
    LETTER_RUN,
    OPTION_LABEL,
    Scan,
    everyday_words,
    greek,
    latin,
    symbols,
)

_WORD_START = re.compile(r"(?<![\w'’])\w")
_NAME_WORDS = re.compile(r"[^\W\d_][^\W\d_.'’-]*\.?(?:[\s'’-]+[^\W\d_][^\W\d_.'’-]*\.?)*")
_CONTACT_LINE = re.compile(r"[>|?*\s]*(.*?)\s*\Z", re.S)  # quote marks before it dropped


@dataclass(frozen=True)
class ContactBlockRule:
    """Short lines just above an address, phone or e-mail line: a signature or a label
    ("> Mijail C Adomo" / "> Asc Partners" / "> 935 69 Gordon Terrace"), each whole."""

    anchors: tuple[str, ...] = ()
    lines_above: int = 0
    max_words: int = 5
    entity: str = "PERSON"
    score: float = 0.6

    def find(self, scan: Scan, per_line: list[list[Finding]]) -> list[Finding]:
        """``per_line``: what was found on each of ``scan.lines``."""
        found: dict[int, Finding] = {}
        for i, hits in enumerate(per_line):
            if not any(f.entity in self.anchors for f in hits):
                continue
            for j in range(i - 1, max(-1, i - 1 - self.lines_above), -1):
                offset, line = scan.lines[j]
                m = _CONTACT_LINE.match(line)
                value = m.group(1) if m else ""
                words = value.split()
                if (
                    not 1 <= len(words) <= self.max_words
                    or any(ch.isdigit() for ch in value)
                    or value[-1] in ".?!:;,"
                    or OPTION_LABEL.match(value)
                    or scan.allowed(value)
                ):
                    break  # prose, a label, an answer option: not part of a contact block
                if any(f.entity in self.anchors for f in per_line[j]):
                    break
                start = offset + (m.start(1) if m else 0)
                found[j] = Finding(
                    self.entity, start, start + len(value), value, self.score, "ContactBlock"
                )
        return list(found.values())


@dataclass(frozen=True)
class LowercaseRule:
    """A line typed without capitals ("follow up with benjamin a seiler") is read a
    second time with each word capitalised; names of at most ``max_words`` words found
    that way count as ``labels``' entities."""

    labels: tuple[str, ...] = ()
    max_words: int = 3
    score: float = 0.6

    def find(self, scan: Scan, nlp: Any, entity_mapping: dict[str, str]) -> list[Finding]:
        """``nlp``: the spaCy pipeline that reads the capitalised copies; its labels map
        to entities by ``entity_mapping``."""
        if not self.labels:
            return []
        todo: list[tuple[int, str, str]] = []  # (offset, line, capitalised copy)
        for offset, line in scan.lines:
            if any(ch.isupper() for ch in line) or sum(ch.isalpha() for ch in line) < 3:
                continue
            cased = _WORD_START.sub(lambda m: m.group(0).upper(), line)
            if len(cased) == len(line):  # offsets must stay the same
                todo.append((offset, line, cased))
        if not todo:
            return []
        findings = []
        for (offset, line, _), doc in zip(todo, nlp.pipe([c for *_, c in todo]), strict=True):
            for ent in doc.ents:
                entity = entity_mapping.get(ent.label_, "")
                if ent.label_ not in self.labels or len(ent) > self.max_words:
                    continue
                span = line[ent.start_char : ent.end_char]
                text = span.strip().rstrip(".,;:!?)\"'")
                if (
                    not _NAME_WORDS.fullmatch(text)  # "token ghp_0123…" is no name
                    or not scan.accepts(entity, text, self.score)
                    or scan.allowed(text)
                ):
                    continue
                start = offset + ent.start_char + len(span) - len(span.lstrip())
                findings.append(
                    Finding(entity, start, start + len(text), text, self.score, "LowercaseLine")
                )
        return findings


@dataclass(frozen=True)
class CuedNameRule:
    """A name typed in lower case right after a cue ("hi i am belal", "my work at
    google"), where spaCy sees none.  The word after a match of one of ``cues`` (regexes)
    is ``entity`` when the model's word vectors know it only capitalised ("Belal"), or in
    no case and it has ``min_letters``+ letters; with ``commoner_capitalised``, also when
    its capitalised form is the commoner one ("google": "Google"), ``not_names`` aside.
    Not "i am happy": "happy" is a word in lower case.  ``lower_lines``: only in lines
    without capitals."""

    entity: str = ""
    cues: tuple[str, ...] = ()
    lower_lines: bool = False
    commoner_capitalised: bool = False
    not_names: tuple[str, ...] = ()
    min_letters: int = 4
    score: float = 0.6

    def names(self, vocab: Any, word: str) -> bool:
        if word in self.not_names:
            return False
        cased = word.capitalize()
        if not vocab.has_vector(word):
            return vocab.has_vector(cased) or len(word) >= self.min_letters
        if not self.commoner_capitalised or not vocab.has_vector(cased):
            return False
        # Vector rows are ordered by frequency; a word pruned from the table shares a
        # row with another, which says nothing of which form is commoner.
        lower_rank, cased_rank = vocab[word].rank, vocab[cased].rank
        return bool(cased_rank < lower_rank)

    @functools.cached_property
    def pattern(self) -> re.Pattern[str]:
        cues = "|".join(f"(?:{c})" for c in self.cues) or "(?!)"
        # The cues in any case ("I worked for"); the word in lower case.
        return re.compile(rf"(?i:\b(?:{cues}))\s+([a-z][a-z'-]*[a-z])\b")

    def find(self, scan: Scan) -> list[Finding]:
        found = []
        for offset, line in scan.lines:
            if self.lower_lines and any(ch.isupper() for ch in line):
                continue
            for m in self.pattern.finditer(line):
                word = m.group(1)
                if (
                    not self.names(scan.vocab, word)
                    or scan.allowed(word)
                    or not scan.accepts(self.entity, word, self.score)
                ):
                    continue
                start = offset + m.start(1)
                end = start + len(word)
                found.append(Finding(self.entity, start, end, word, self.score, "CuedName"))
        return found


@dataclass(frozen=True)
class ForeignRunRule:
    """In a line written mostly in the Latin script (``latin_share`` of its letters at
    least), a run of ``min_letters``+ letters of a script spaCy's English model cannot
    read (not Latin, not Greek: α and Δ are symbols) is ``entity``: "My manager 王伟
    keeps …", "ask Владимир".  A whole text in such a script is the local reader's."""

    entity: str = ""
    min_letters: int = 2
    max_unspaced: int = 4  # a longer run of Chinese or Japanese is a phrase, not a name
    latin_share: float = 0.6
    score: float = 0.6

    def _foreign(self, run: str, min_letters: int) -> bool:
        if symbols(run):
            return False
        return not latin(run[0]) and not greek(run[0]) and len(run) >= min_letters

    def find(self, scan: Scan) -> list[Finding]:
        if not self.entity:
            return []
        out = []
        for offset, line in scan.lines:
            letters = [ch for ch in line if ch.isalpha()]
            latin_letters = sum(1 for ch in letters if latin(ch))
            if not letters or latin_letters < self.latin_share * len(letters):
                continue
            for m in LETTER_RUN.finditer(line):
                run = m.group(0)
                if not self._foreign(run, self.min_letters):
                    continue
                if len(run) > self.max_unspaced and "\u2e80" <= run[0] <= "\u9fff":
                    continue  # Chinese or Japanese of more than a name's length: a phrase
                start = offset + m.start()
                out.append(
                    Finding(self.entity, start, start + len(run), run, self.score, "ForeignRun")
                )
        return out

    def unreadable(self, text: str) -> list[str]:
        """The runs of ``text`` in a script the detector cannot read, by their scripts'
        names ("CJK", "HANGUL"), one per run, of any length (王 alone is a surname): what
        is left of them in a text was checked by nothing here."""
        return [
            unicodedata.name(m.group(0)[0], "UNKNOWN").split()[0]
            for m in LETTER_RUN.finditer(text)
            if self._foreign(m.group(0), 1)
        ]


@dataclass(frozen=True)
class FormFieldRule:
    """A form's field at a line's start, its name capitalised as a form writes it, then a
    colon ("Hometown: Kumasi", "- Place of birth: Cluj-Napoca, Romania", "**Employer**:
    Kessler Logistics"; not a config file's "location: eastus").  Its value, up to the
    line's or the sentence's end, is ``entity``: each part between commas or brackets,
    quote and emphasis marks aside, of at most ``max_words`` words; not a part with a
    digit (an address has its own recognizers), a path, an address or code in it, nor
    one of everyday words alone ("Remote", "Main Office"), nor in lower case a word
    the vectors know.  A value that ends in "?" is a question, not a form's.  A form is
    filled in about someone, so any finding in a field's value is tied to them
    (:meth:`value_span`, the detector's judgement), "I" or not."""

    entity: str = ""
    fields: tuple[str, ...] = ()
    max_words: int = 4
    score: float = 0.6

    @functools.cached_property
    def pattern(self) -> re.Pattern[str]:
        names = sorted(self.fields, key=len, reverse=True)
        alt = "|".join(_typed_field(name) for name in names) or "(?!)"
        return re.compile(rf"[ \t>*•·-]*(?:{alt})[*_]*[ \t]*[:：][ \t]*")

    def value_span(self, line: str) -> tuple[int, int] | None:
        """Where the field's value lies in ``line`` (None: the line opens no field)."""
        m = self.pattern.match(line)
        if m is None:
            return None
        for end in _VALUE_END.finditer(line, m.end()):
            if end.group(0) == "?":
                return None  # "City: which is bigger, Paris or Rome?"
            # Not the dot of "St. Louis"; looked for in the three characters before it
            # (its lookbehind sees the one before those): linear in the line.
            dot = end.start()
            if end.group(0) != "." or not _ABBREVIATION.search(line, max(0, dot - 3), dot):
                return m.end(), dot
        return m.end(), len(line.rstrip())

    def find(self, scan: Scan) -> list[Finding]:
        found = []
        for offset, line in scan.lines:
            span = self.value_span(line)
            if span is None:
                continue
            first = True
            for part in re.finditer(r"[^,()\[\]]+", line[span[0] : span[1]]):
                # A part may open another field ("City: Enugu, Country: Nigeria"): what
                # stands before a colon is its name, unless the part opens the value.
                segments = list(re.finditer(r"[^:：]+", part.group(0)))
                chosen = segments[:1] if first else []
                chosen += segments[-1:] if len(segments) > 1 or not first else []
                first = False
                for seg in chosen:
                    start = offset + span[0] + part.start() + seg.start()
                    value = self._value(scan, seg.group(0))
                    if value is not None:
                        start += seg.group(0).index(value)
                        found.append(
                            Finding(
                                self.entity,
                                start,
                                start + len(value),
                                value,
                                self.score,
                                "FormField",
                            )
                        )
        return found

    def _value(self, scan: Scan, raw: str) -> str | None:
        """The value in one part of a field (``raw``), or None when it holds none."""
        value = raw.strip(_MARKS)
        words = value.split()
        if (
            not 1 <= len(words) <= self.max_words
            or not any(ch.isalpha() for ch in value)
            or _NOT_A_NAME.search(value)
            or all(
                w.lower() in everyday_words(scan.vocab) or scan.vocab[w].is_stop
                for w in re.findall(r"[^\W\d_]+", value)
            )
            or (value.islower() and any(scan.vocab.has_vector(w) for w in words))
            or scan.allowed(value)
            or not scan.accepts(self.entity, value, self.score)
        ):
            return None
        return value


def _typed_field(name: str) -> str:
    """A field's name as a form types it: its first letter a capital, the rest in any
    case, its words apart by any spaces."""
    first, *rest = name.split()
    tail = re.escape(first[1:]) + "".join(r"\s+" + re.escape(w) for w in rest)
    return f"{re.escape(first[0].upper())}(?i:{tail})"


# A value's end: a sentence's (a dot, "?", "!" or ";" before a space or the line's end).
_VALUE_END = re.compile(r"[.!?;](?=\s|$)")
_ABBREVIATION = re.compile(r"(?<![\w.])[A-Z][a-z]{0,2}$")  # "St", "Mt", "Ft", "Dr"
# Quote and emphasis marks and spaces around a value.
_MARKS = " \t\"'“”‘’«»„*_`"
# A digit, a path, an address, code: not a name.
_NOT_A_NAME = re.compile(r"\d|[/\\@=<>{}|$#~]|\w\.\w")
