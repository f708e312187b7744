"""What a value the local privacy reader lists may be, judged by its shape (issue 48:
moved out of :mod:`assistant.privacy.reader`, which uses these when it reads and again
whenever a reading is used).  Every rule here names the split it was written from."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence

from assistant.privacy.findings import Finding

# The model's categories, and the policy entity each becomes.  "contact" is split by
# the value's shape (see entity_of).
CATEGORIES: dict[str, str] = {
    "person": "PERSON",
    "organisation": "ORGANIZATION",
    "place": "LOCATION",
    "address": "STREET_ADDRESS",
    "contact": "USERNAME",
    "id": "ID_NUMBER",
}

# A link's domain holds a letter ("0.19" is a number; MMLU controls 60-119, issue 48).
_LINK = re.compile(r"(?i)^(?:https?://|www\.)|^(?=[^/]*[^\W\d_])[\w-]+(?:\.[\w-]+)+(?:/\S*)?$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.\w+$")
_PHONE = re.compile(r"^\+?[\d\s().-]{6,}$")


def entity_of(category: str, value: str) -> str:
    """The policy entity of a (category, value): contact values by their shape."""
    if category != "contact":
        return CATEGORIES[category]
    if _EMAIL.match(value):
        return "EMAIL_ADDRESS"
    if _PHONE.match(value) and sum(ch.isdigit() for ch in value) >= 6:
        return "PHONE_NUMBER"
    if _LINK.match(value):
        return "URL"
    return "USERNAME"


def shaped(entity: str, value: str) -> str | None:
    """The entity a value is replaced as, by its shape, or None when it is none: a user
    name or handle is one token with a letter ("2017" is a year); an ID holds four digits,
    or letters and digits mixed, and is no amount ("120", "55,000,000" are answers).  A
    "contact" or "id" with words and no digits is a name the model filed wrongly, and is
    judged as a person ("李娜" listed as a contact).  (Written from the bundled MMLU
    controls 0-59 and PUPA-TNB's seen half.)  A user name that is one capitalised word
    ("Leo"; not one in capitals: two to four capitals the reader reads as a term) is a
    person's name; a chemical formula is no name ("AlBr3").
    (Written from MMLU controls 60-119, issue 48.)"""
    value = value.strip()
    letters = sum(ch.isalpha() for ch in value)
    digits = sum(ch.isdigit() for ch in value)
    named = letters > 0 and digits == 0
    if entity == "USERNAME":
        if value.isalpha() and value[:1].isupper() and not value.isupper():
            return "PERSON"  # a capitalised word alone ("Leo") is a name filed as a handle
        if not any(ch.isspace() for ch in value) and letters:
            return entity
        return "PERSON" if named else None
    if entity == "PERSON" and _FORMULA.match(value):
        return None  # "AlBr3", "CaCl2": a formula, not a name
    if entity == "ID_NUMBER":
        if named:
            return "PERSON"
        if _QUANTITY.match(value):
            return None
        return entity if digits >= 4 or (letters and digits + letters >= 5) else None
    return entity


# Element symbols and counts, a digit among them ("AlBr3", "H2O"): a chemical formula.
_FORMULA = re.compile(r"^(?=.*\d)(?:[A-Z][a-z]?\d*)+$")
_QUANTITY = re.compile(r"^[$€£]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$|^\d+\.\d+$")


_LETTERS = re.compile(r"[^\W\d_]+")


def worth_hiding(value: str, common: Callable[[str], bool]) -> bool:
    """Whether a span the model listed can be personal: not one or two characters, and
    not only ordinary lower-case words (``common``: a word of the language's dictionary).
    A capital, a digit, a sign such as @ or a non-Latin letter keeps it."""
    if sum(ch.isalnum() for ch in value) < 2:
        return False
    words = _LETTERS.findall(value)
    if not words or any(not w.isascii() for w in words):
        return True
    if any(not ch.isalpha() and not ch.isspace() and ch not in "'-" for ch in value):
        return True  # digits, @, dots, slashes: a number, a handle, a link
    return any(not w.islower() or not common(w) for w in words)


# Words after an article: letters, spaces, hyphens and apostrophes only (a digit, a dot
# or an initial may be what makes a value worth hiding: "42 oak lane", "mark j. white").
_PHRASE = re.compile(r"^(?:a|an|the|A|An|The)\s[^\W\d_]+(?:[\s'’-]+[^\W\d_]+)+$")


def recheck(findings: Sequence[Finding], common: Callable[[str], bool]) -> list[Finding]:
    """The reader's findings judged again by the rules on values
    (:func:`shaped`; a value of words after an article is worth hiding only for a
    word of two letters or more after it that is (see :func:`worth_hiding`): "A
    fifteen year-old boy", "The juvenile court judge" are ordinary words), whenever a
    reading is used: a reading taken before a rule changed is judged by today's rules.
    (Written from MMLU controls 60-119, issue 48.)"""
    out = []
    contacts = {entity_of("contact", v) for v in ("a@b.cd", "+1 555 0100", "b.cd", "ab")}
    for f in findings:
        kind = entity_of("contact", f.text) if f.entity in contacts else f.entity
        entity = shaped(kind, f.text)
        # The words after the article, as written ("The juvenile court judge" is
        # ordinary words: its article's capital makes no name).
        words = [w for w in _LETTERS.findall(f.text.split(None, 1)[-1]) if len(w) > 1]
        phrase = (
            entity in ("PERSON", "ORGANIZATION", "LOCATION")
            and _PHRASE.match(f.text) is not None
            and len(words) > 0
        )
        if entity is None or (phrase and not worth_hiding(" ".join(words), common)):
            continue
        out.append(f if entity == f.entity else dataclasses.replace(f, entity=entity))
    return out
