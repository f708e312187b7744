"""Coarser values that keep a question answerable: ``Tromsø`` -> "a city in Norway",
``Nordlys Biotech`` -> "a biotech company".

A placeholder alone can leave the teacher nothing to work with ("I live in <PLACE_1>:
what should I wear in January?").  Where ``policy.yaml``'s ``generalise`` section allows it
for a type, the first occurrence of the placeholder is followed by its coarser value:
``I live in <PLACE_1> (a city in Norway)``.  The placeholder stays, so the answer is
restored as usual.

A description is never more precise than a country or a kind of organisation, and it
is dropped for a coarser one when it names any value the question protects ("a city in
Norway" when the user also wrote "Norway"); the egress guard checks it like every other
byte.  Places come from a gazetteer built from GeoNames (``make_places.py``).
"""

from __future__ import annotations

import functools
import gzip
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from assistant.base.textform import normalise
from assistant.privacy.placeholders import PLACEHOLDER, Replacement
from assistant.privacy.policy import GeneraliseRule

PLACES_FILE = Path(__file__).with_name("data") / "places.tsv.gz"
_RANK = {"country": 2, "state": 1, "city": 0}  # a name is first a country's, then a state's


@dataclass(frozen=True)
class Place:
    kind: str  # city | country | state
    name: str
    country: str  # "" when several countries have a place of that name
    continent: str
    population: int


# Letters NFKD leaves whole: "Tromso" finds Tromsø.
_LATIN = str.maketrans({"ø": "o", "æ": "ae", "œ": "oe", "ß": "ss", "ł": "l", "đ": "d", "ı": "i"})


def fold(name: str) -> str:
    """The key a place is looked up by: NFKC, case-folded, no accents, no "the"."""
    text = unicodedata.normalize("NFKC", name).casefold().translate(_LATIN)
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c))
    text = re.sub(r"^the\s+", "", " ".join(text.replace("’", "'").split()))
    return text.strip(" .,'")


@functools.cache
def gazetteer(path: Path = PLACES_FILE) -> dict[str, Place]:
    """Folded name -> the place (the largest of its name; countries before cities)."""
    places: dict[str, Place] = {}
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("#") or not line.strip():
                continue
            kind, name, country, continent, population = line.rstrip("\n").split("\t")
            place = Place(kind, name, country, continent, int(population))
            key = fold(name)
            old = places.get(key)
            if old is None or (_RANK[kind], place.population) > (_RANK[old.kind], old.population):
                places[key] = place
    return places


def place(value: str) -> Place | None:
    """The place named ``value``; "Lagos, Nigeria" is looked up as "Lagos"."""
    places = gazetteer()
    return places.get(fold(value)) or places.get(fold(value.split(",")[0]))


@dataclass(frozen=True)
class OrgKind:
    """An organisation whose name holds one of ``words`` is ``description``."""

    words: tuple[str, ...]
    description: str


def describe_place(value: str) -> list[str]:
    """Coarser descriptions of a place, finest first."""
    p = place(value)
    if p is None:
        return ["a place"]
    if p.kind == "country":
        return [f"a country in {p.continent}", "a country"]
    if p.kind == "state":
        return ["a US state", "a region"]
    out = []
    if p.country:
        out.append(f"a city in {p.country}")
    if p.continent:
        out.append(f"a city in {p.continent}")
    return [*out, "a city"]


def describe_org(value: str, kinds: Sequence[OrgKind]) -> list[str]:
    words = set(re.findall(r"[^\W\d_]+", value.casefold()))
    for kind in kinds:
        if words & set(kind.words):
            return [kind.description, "an organisation"]
    return ["an organisation"]


def _names(text: str, value: str) -> bool:
    """Whether ``text`` holds ``value`` (or one of its words of 4+ letters) as words."""
    flat = normalise(text)
    parts = [normalise(value), *(w for w in re.findall(r"[^\W\d_]{4,}", normalise(value)))]
    return any(re.search(rf"(?<!\w){re.escape(p)}(?!\w)", flat) for p in parts if p)


def coarser(candidates: Sequence[str], protected: Sequence[tuple[str, str]]) -> str | None:
    """The finest candidate that names no protected value (None if all do)."""
    for text in candidates:
        if not any(_names(text, value) for _, value in protected):
            return text
    return None


def annotate(text: str, hints: dict[str, str]) -> str:
    """``text`` with the first occurrence of each hinted placeholder followed by
    ``(its description)``."""
    done: set[str] = set()

    def put(m: re.Match[str]) -> str:
        ph = m.group(0)
        if ph in hints and ph not in done:
            done.add(ph)
            return f"{ph} ({hints[ph]})"
        return ph

    return PLACEHOLDER.sub(put, text)


class Generaliser:
    """The coarser values of a question's replacements, per ``policy.yaml``'s
    ``generalise`` section."""

    def __init__(self, entities: Sequence[str], organisations: Sequence[OrgKind]) -> None:
        self.entities = frozenset(entities)
        self.organisations = tuple(organisations)

    @classmethod
    def from_policy(cls, rule: GeneraliseRule) -> Generaliser:
        kinds = [
            OrgKind(tuple(str(w).casefold() for w in k["words"]), str(k["description"]))
            for k in rule.organisations
        ]
        return cls(rule.entities, kinds)

    def candidates(self, entity: str, value: str) -> list[str]:
        if entity not in self.entities:
            return []
        if entity == "ORGANIZATION":
            return describe_org(value, self.organisations)
        return describe_place(value)

    def hints(
        self, replacements: Sequence[Replacement], protected: Sequence[tuple[str, str]]
    ) -> dict[str, str]:
        """Placeholder -> its coarser value, for the replacements that have one naming
        no protected value."""
        out: dict[str, str] = {}
        for r in replacements:
            if r.placeholder in out:
                continue
            hint = coarser(self.candidates(r.entity, r.value), protected)
            if hint:
                out[r.placeholder] = hint
        return out
