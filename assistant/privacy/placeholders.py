"""Reversible placeholders: ``Dr. Amelia Thompson`` -> ``Dr. <PERSON_1>`` and back.

A :class:`Vault` keeps the mapping for a session: the same value always gets
the same placeholder, and a part of a known name ("Thompson" after "Amelia
Thompson") gets the name's placeholder.  The vault never leaves the machine.
:meth:`Vault.restore` puts the values back into text that came from the
teacher or the student, tolerating the ways models mangle placeholders:
``<person_1>``, ``<Person 1>``, ``[PERSON_1]``, ``&lt;PERSON_1&gt;``, ``PERSON_1``.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from assistant.base.safetext import link_spans, merged_spans
from assistant.base.textform import (
    bounded,
    date_spans,
    dates_in,
    digit_spans,
    find_folded,
    folded,
    normalise,
)
from assistant.privacy.findings import Finding

PLACEHOLDER = re.compile(r"<([A-Z]+)_(\d+)>")
# A placeholder of any tag in the forms models write it in (<ORG_1>, <person 1>, [PERSON_1],
# &lt;ORG_1&gt;, bare ORG_1): text holding one speaks of a value of its own question.
ANY_PLACEHOLDER = re.compile(r"(?:<|&lt;|\[)\s*[A-Za-z]+[ _-]?\d+\s*(?:>|&gt;|\])|\b[A-Z]+_\d+\b")
_NAME_TITLES = {"dr", "prof", "mr", "mrs", "ms", "mx", "miss", "sir", "dame", "rev", "jr", "sr"}


# Common English words: not content (the rewrite's drift check), and not identifying as a
# part of a name ("W. Which", a false PERSON, must not make every "Which" a leak).
COMMON_WORDS = frozenset(
    [
        "the",
        "and",
        "for",
        "are",
        "but",
        "not",
        "you",
        "your",
        "with",
        "this",
        "that",
        "from",
        "have",
        "has",
        "had",
        "was",
        "were",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "does",
        "did",
        "can",
        "could",
        "would",
        "should",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "its",
        "into",
        "onto",
        "about",
        "than",
        "then",
        "them",
        "they",
        "their",
        "there",
        "these",
        "those",
        "been",
        "being",
        "also",
        "any",
        "all",
        "each",
        "some",
        "such",
        "only",
        "very",
        "just",
        "one",
        "two",
        "out",
        "over",
        "under",
    ]
)


# Names that are also common words: protected only as a name is written (May, WILL).
_NAME_WORDS = frozenset({"may", "will"})
_NOT_NAMES = COMMON_WORDS - _NAME_WORDS


@functools.cache
def _stop_words() -> frozenset[str]:
    from spacy.lang.en.stop_words import STOP_WORDS

    return frozenset(STOP_WORDS)


def as_written(part: str) -> str:
    """A pattern for a name part only as a name is written: as typed, in capitals, or
    capitalised ("Will", "WILL"; not "will")."""
    forms = sorted({part, part.upper(), part[:1].upper() + part[1:]})
    return "|".join(bounded(form) for form in forms)


def cased(part: str) -> bool:
    """Whether a name part is also an everyday word ("Will", "May", "Name", "Rich" as
    spaCy's stop words have them): then it is protected only as a name is written
    (capitalised or in capitals), not as the word in lower case."""
    word = part.casefold()
    return word in _NAME_WORDS or word in _stop_words()


def words_of(text: str) -> frozenset[str]:
    return frozenset(text.split())


def bare(word: str) -> str:
    """A word as the word lists below hold it: case-folded, without a final full stop."""
    return word.casefold().rstrip(".")


# Two-letter words and name particles: never a name on their own ("Li" and "Wu" are).
_SHORT_WORDS = words_of(
    "of to in is it an as at be by do go he if me my no on or so up us we am oh ok hi "
    "de da di du la le el al van von der den del della dos das bin ibn st san"
)


def name_parts(value: str) -> list[str]:
    """The words of a name worth protecting on their own, in any case and of any length
    (no initials, titles or common words).  A short word or particle counts only where the
    name writes it with a capital ("Oh" of "Sarah Oh", "Le" of "Minh Le"; not "van" of
    "Ludwig van Beethoven"), and is then protected only as written (:func:`written_only`)."""
    words = re.findall(r"[^\W\d_](?:[^\W\d_]|['-])*", value)
    return [
        w
        for w in words
        if len(w) >= 2
        and bare(w) not in _NAME_TITLES
        and w.casefold() not in _NOT_NAMES
        and (w.casefold() not in _SHORT_WORDS or w[:1].isupper())
    ]


_STREET = re.compile(
    r"(?:[^\W\d_][\w'-]*\s+){1,3}(?:street|st|road|rd|avenue|ave|lane|ln|drive|dr|"
    r"boulevard|blvd|way|court|ct|place|pl|terrace|close|crescent|square|sq|highway|hwy|"
    r"parkway|pkwy|alley|row|gasse|straße|strasse|str|weg|allee|platz|rue|via|calle|avenida)"
    r"(?!\w)\.?",
    re.IGNORECASE,
)


def street_names(value: str) -> list[str]:
    """The street of an address without its number ("221 Baker Street" -> "Baker Street")."""
    return [m.group(0).strip() for m in _STREET.finditer(value)]


# Entity types whose value is a date, compared in any format.
DATE_TYPES = frozenset({"DATE_OF_BIRTH", "DATE_TIME"})
# Entity types whose digits identify them whatever the separators.
DIGIT_TYPES = frozenset(
    {
        "PHONE_NUMBER", "CREDIT_CARD", "US_SSN", "IBAN_CODE", "US_BANK_NUMBER", "US_ITIN",
        "US_PASSPORT", "IP_ADDRESS", "DATE_OF_BIRTH", "MEDICAL_LICENSE",
    }
)  # fmt: skip


# An organisation's legal form, and words that say what kind of firm it is: people drop
# them when they name the firm again ("Crown Point Corporation" ... "Crown Point",
# "Toboggan Brewing Company" ... "Toboggan").  Written from PUPA-TNB's seen half.
_LEGAL_FORMS = words_of(
    "inc incorporated ltd limited llc plc corp corporation co company gmbh ag sa llp "
    "group holdings pvt private & and sons"
)
_KIND_WORDS = words_of(
    "brewing brewery systems services service solutions technologies technology tech "
    "healthcare consulting aerosystems aerospace pharmaceuticals pharma biotech labs "
    "laboratories foods motors industries enterprises international global"
)
# Words too general to stand for one firm alone ("National Bank" is not "National").
_GENERIC_HEADS = words_of(
    "national international american general united global first royal central standard "
    "new great universal modern city state federal world"
)


def org_short_forms(value: str) -> list[str]:
    """How an organisation is named again, shorter: up to its legal form where a finding
    ran on past it ("Toboggan Brewing Company Introduction"), without its legal form
    ("Epee Inc." -> "Epee"), then without the words for its kind of business ("Safran
    Aerosystems Services" -> "Safran").  A short form must still be a name: not one
    general word."""
    given = [w for w in (w.strip(",;:") for w in value.split()) if w]
    words = given[1:] if given and given[0].casefold() == "the" else given

    def strip(ws: list[str], drop: frozenset[str]) -> list[str]:
        while len(ws) > 1 and bare(ws[-1]) in drop:
            ws = ws[:-1]
        return ws

    legal = [bare(w) in _LEGAL_FORMS for w in words]
    ends = [i for i in range(1, len(words) - 1) if legal[i] and not legal[i + 1]]
    whole = words[: ends[-1] + 1] if ends else words
    head = strip(whole, _LEGAL_FORMS)
    forms: list[str] = []
    for h in (whole, head, strip(head, _KIND_WORDS)):
        form = " ".join(h)
        names = [w for w in name_parts(form) if len(w) >= 3 and w.casefold() not in _GENERIC_HEADS]
        if h != given and names and form not in forms:
            forms.append(form)
    return forms


def parts(entity: str, value: str) -> list[str]:
    """The pieces of a value that identify it on their own: the words of a name, the
    street of an address, an organisation's short forms.  (Digits and dates are
    compared by :mod:`textform`.)"""
    if entity in ("PERSON", "NAME"):
        return name_parts(value)
    if entity == "STREET_ADDRESS":
        return street_names(value)
    if entity == "ORGANIZATION":
        return org_short_forms(value)
    return []


def written_only(entity: str, part: str) -> bool:
    """Whether ``part`` counts only as a name is written (see :func:`as_written`): a name
    part that is also an everyday word, and every short form of an organisation ("Epic"
    of "Epic Systems" is not "an epic")."""
    return entity == "ORGANIZATION" or cased(part) or part.casefold() in _SHORT_WORDS


def spans_of(entity: str, value: str, text: str) -> list[tuple[int, int]]:
    """Where ``value`` or one of its identifying parts shows in ``text``, in any of the
    forms the normal form equates (case, accents composed or not, invisible characters,
    line breaks), a date in any format; a cased part only as a name is written."""
    flat = folded(text)  # made once for every comparison below
    spans: list[tuple[int, int]] = []
    if len(value.strip()) >= 3:
        spans += find_folded(flat, value)
    for part in parts(entity, value):
        if written_only(entity, part):
            spans += [m.span() for m in re.finditer(as_written(part), text)]
        else:
            spans += find_folded(flat, part)
    if entity in DATE_TYPES and (dates := dates_in(value)):
        spans += [(s, e) for s, e, found in date_spans(flat) if found & dates]
    digits = re.sub(r"\D", "", normalise(value))
    if entity in DIGIT_TYPES and len(digits) >= 6:
        spans += [(s, e) for s, e, run in digit_spans(flat) if digits in run]
    return spans


# What is left of a finding beside a placeholder that is no name on its own.
_NOT_ALONE = _NAME_TITLES | _SHORT_WORDS | COMMON_WORDS


def outside_placeholders(text: str, findings: Iterable[Finding]) -> list[Finding]:
    """``findings`` in ``text`` with the placeholders they overlap cut out.  A finding
    inside a placeholder ("ORG_14" of "<ORG_14>", which spaCy may tag) is none; one that
    runs on past a placeholder ("<PERSON_1> Jones") keeps what lies outside it."""
    ours = [m.span() for m in PLACEHOLDER.finditer(text)]
    out = []
    for f in findings:
        pieces = [(f.start, f.end)]
        for s, e in ours:
            pieces = [p for a, b in pieces for p in ((a, min(b, s)), (max(a, e), b)) if p[0] < p[1]]
        for a, b in pieces:
            piece = text[a:b]
            core = piece.strip(" \t\n,.;:()[]'\"-")
            if sum(ch.isalnum() for ch in core) < 2 or bare(core) in _NOT_ALONE:
                continue  # "Dr. <PERSON_1>", "<PERSON_1>'s": nothing of a name is left
            start = a + piece.find(core)
            out.append(replace(f, start=start, end=start + len(core), text=core))
    return out


@dataclass(frozen=True)
class Replacement:
    placeholder: str
    entity: str
    value: str


@dataclass(frozen=True)
class Redacted:
    text: str
    replacements: tuple[Replacement, ...]

    @property
    def counts(self) -> dict[str, int]:
        """Entity type -> how many distinct values (never the values themselves)."""
        out: dict[str, int] = {}
        for entity in {(r.entity, r.placeholder) for r in self.replacements}:
            out[entity[0]] = out.get(entity[0], 0) + 1
        return out


def _overlaps(spans: list[tuple[int, int]], start: int, end: int) -> bool:
    """Whether [start, end) meets one of ``spans`` (sorted, apart)."""
    i = bisect.bisect_left(spans, (end,)) - 1  # the last that starts before ``end``
    return i >= 0 and start < spans[i][1]


@dataclass
class Vault:
    """Placeholder <-> value, for one session; lives only in this process."""

    tag_of: Callable[[str], str] = lambda entity: entity
    _by_value: dict[tuple[str, str], str] = field(default_factory=dict)
    _values: dict[str, tuple[str, str]] = field(
        default_factory=dict
    )  # placeholder -> (entity, value)
    _counters: dict[str, int] = field(default_factory=dict)

    def _known_person(self, value: str) -> str | None:
        """The placeholder of a known person whose name holds all of ``value``'s words."""
        parts = {normalise(p) for p in name_parts(value)}
        if not parts:
            return None
        for ph, (entity, known) in self._values.items():
            if self.tag_of(entity) != "PERSON":
                continue
            known_parts = {normalise(p) for p in name_parts(known)}
            if parts <= known_parts or known_parts <= parts:
                return ph
        return None

    def placeholder(self, entity: str, value: str) -> str:
        tag = self.tag_of(entity)
        key = (tag, normalise(value))
        if key in self._by_value:
            return self._by_value[key]
        if tag in ("PERSON", "ORG", "NAME"):
            # "Thompson" after "Amelia Thompson" -- whatever type the detector gave it.
            known = self._known_person(value)
            if known is not None:
                self._by_value[key] = known
                return known
        self._counters[tag] = self._counters.get(tag, 0) + 1
        ph = f"<{tag}_{self._counters[tag]}>"
        self._by_value[key] = ph
        self._values[ph] = (entity, value)
        return ph

    def redact(self, text: str, findings: Sequence[Finding]) -> Redacted:
        """Replace each finding (non-overlapping) with its placeholder."""
        pieces: list[str] = []
        replacements: list[Replacement] = []
        cursor = 0
        for f in sorted(findings, key=lambda f: f.start):
            if f.start < cursor:
                continue
            ph = self.placeholder(f.entity, f.text)
            pieces += [text[cursor : f.start], ph]
            replacements.append(Replacement(ph, f.entity, f.text))
            cursor = f.end
        pieces.append(text[cursor:])
        out = "".join(pieces)
        # The same value elsewhere in the text, where the detector missed it, goes too;
        # so does a person's surname or first name on its own, as a name is written.
        seen = {(r.value, r.placeholder, r.entity) for r in replacements}
        for value, ph, entity in sorted(seen, key=lambda x: -len(x[0])):
            out = self._replace(out, value, ph, entity)
        # A value an earlier question of this conversation protects, met again where the
        # detector missed it ("Thompson" after "Dr. Amelia Thompson"): the same placeholder,
        # rather than a request the guard would refuse.
        earlier = [(v, ph, e) for ph, (e, v) in self._values.items() if (v, ph, e) not in seen]
        for value, ph, entity in sorted(earlier, key=lambda x: -len(x[0])):
            replaced = self._replace(out, value, ph, entity)
            if replaced != out:
                replacements.append(Replacement(ph, entity, value))
                out = replaced
        return Redacted(out, tuple(replacements))

    def redact_values(self, text: str, found: Sequence[tuple[str, str]]) -> Redacted:
        """Replace each (entity, value) wherever it occurs in ``text`` (values found in
        another view of the text, whose spans do not apply here).  A value that does not
        occur gets no placeholder."""
        out = text
        replacements: list[Replacement] = []
        # Longest first; of equal length, in the order found (a value found as two
        # entities gets the first one's placeholder, in every run: no set order here).
        for entity, value in sorted(dict.fromkeys(found), key=lambda x: -len(x[1])):
            if self._replace(out, value, "\0", entity) == out:
                continue
            ph = self.placeholder(entity, value)
            out = self._replace(out, value, ph, entity)
            replacements.append(Replacement(ph, entity, value))
        return Redacted(out, tuple(replacements))

    def _replace(self, text: str, value: str, ph: str, entity: str) -> str:
        kind = "PERSON" if self.tag_of(entity) == "PERSON" else entity
        spans = sorted(set(spans_of(kind, value, text)), key=lambda s: (s[0], -s[1]))
        ours = [m.span() for m in PLACEHOLDER.finditer(text)]
        pieces, cursor = [], 0
        for start, end in spans:
            if start < cursor or any(s < end and start < e for s, e in ours):
                continue
            pieces += [text[cursor:start], ph]
            cursor = end
        return "".join(pieces) + text[cursor:] if pieces else text

    def values(self) -> list[tuple[str, str]]:
        """(entity, value) of everything this vault protects."""
        return [(entity, value) for (entity, value) in self._values.values()]

    def _pattern(self) -> re.Pattern[str] | None:
        tags = sorted({ph[1:].rsplit("_", 1)[0] for ph in self._values}, key=len, reverse=True)
        if not tags:
            return None
        alt = "|".join(tags)  # tags are single words of capitals (policy.yaml)
        # Bracketed in any case (<person 1>, [PERSON_1], &lt;PERSON_1&gt;), or bare PERSON_1.
        return re.compile(
            rf"(?:<|&lt;|\[|\{{|\()\s*({alt})[ _-]?(\d+)\s*(?:>|&gt;|\]|\}}|\))"
            rf"|\b(?-i:({alt})_(\d+))\b",  # bare: PERSON_1, capitals and underscore only
            re.IGNORECASE,
        )

    def restore(self, text: str) -> str:
        """Put the original values back in place of (possibly mangled) placeholders,
        except inside a link's target (a URL, a Markdown link, an OSC 8 hyperlink): a
        hostile teacher could ask for values that way, and a click would send them."""
        pattern = self._pattern()
        if pattern is None or not text:
            return text

        links = link_spans(text)
        pieces: list[str] = []
        put: list[tuple[int, int, str]] = []  # where a value went, and what it replaced
        cursor = size = 0
        for m in pattern.finditer(text):
            if any(s <= m.start() < e for s, e in links):
                continue  # never a value inside a link's target: it would leave
            tag, number = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            found = self._values.get(f"<{tag.upper()}_{int(number)}>")
            if found is None:
                continue
            pieces.append(text[cursor : m.start()])
            size += m.start() - cursor
            pieces.append(found[1])
            put.append((size, size + len(found[1]), m.group(0)))
            size += len(found[1])
            cursor = m.end()
        if not put:
            return text
        out = "".join(pieces) + text[cursor:]
        # A value can make a link where there was none ("<PERSON_1>.evil.example/x",
        # "<PERSON_1>://e.x"): the placeholder stays wherever one now is.
        made = merged_spans(link_spans(out))
        if not any(_overlaps(made, start, end) for start, end, _ in put):
            return out
        again, at = [], 0
        for start, end, written in put:
            if _overlaps(made, start, end):
                again += [out[at:start], written]
                at = end
        return "".join(again) + out[at:]

    def restore_all(self, texts: Iterable[str]) -> list[str]:
        return [self.restore(t) for t in texts]

    def dump(self) -> dict[str, Any]:
        """The whole mapping, for the sealed store (assistant.store); values included."""
        return {
            "values": {ph: [entity, value] for ph, (entity, value) in self._values.items()},
            "by_value": [[tag, norm, ph] for (tag, norm), ph in self._by_value.items()],
            "counters": dict(self._counters),
        }

    def merge(self, data: dict[str, Any] | None) -> int:
        """Take in what another writer of the same conversation stored (another window,
        the resident server): its placeholders join these, each counter goes past both.
        Where one placeholder stands for two values (two questions of one conversation
        in flight at once), the stored value keeps it and ours gets a new one: both stay
        protected.  Returns how many such clashes there were."""
        if not data:
            return 0
        other = Vault(tag_of=self.tag_of)
        other.load(data)
        moved: list[tuple[str, tuple[str, str]]] = []
        ours = dict(self._by_value)  # a name's parts too ("Thompson" for Amelia Thompson)
        for ph, held in other._values.items():
            mine = self._values.get(ph)
            if mine is not None and normalise(mine[1]) != normalise(held[1]):
                moved.append((ph, mine))
            self._values[ph] = held
        for key, ph in other._by_value.items():
            self._by_value.setdefault(key, ph)
        for ph in self._values:
            tag, number = ph[1:-1].rsplit("_", 1)
            self._counters[tag] = max(self._counters.get(tag, 0), int(number))
        for old, (entity, value) in moved:
            tag = old[1:-1].rsplit("_", 1)[0]
            self._counters[tag] += 1
            new = f"<{tag}_{self._counters[tag]}>"
            self._values[new] = (entity, value)
            for key, ph in ours.items():
                if ph == old:
                    self._by_value[key] = new
        return len(moved)

    def load(self, data: dict[str, Any]) -> None:
        """Take over a mapping made by :meth:`dump` (a resumed conversation)."""
        values = data.get("values")
        by_value = data.get("by_value")
        counters = data.get("counters")
        if not isinstance(values, dict) or not isinstance(by_value, list):
            raise ValueError("not a vault dump")
        self._values = {str(ph): (str(ev[0]), str(ev[1])) for ph, ev in values.items()}
        self._by_value = {(str(t), str(n)): str(ph) for t, n, ph in by_value}
        self._counters = {str(k): int(v) for k, v in (counters or {}).items()}
