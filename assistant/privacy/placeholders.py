"""Reversible placeholders: ``Dr. Amelia Thompson`` -> ``Dr. <PERSON_1>`` and back.

A :class:`Vault` keeps the mapping for a session: the same value always gets
the same placeholder, and a part of a known name ("Thompson" after "Amelia
Thompson") gets the name's placeholder.  The vault never leaves the machine.
:meth:`Vault.restore` puts the values back into text that came from the
teacher or the student, tolerating the ways models mangle placeholders:
``<person_1>``, ``<Person 1>``, ``[PERSON_1]``, ``&lt;PERSON_1&gt;``, ``PERSON_1``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from assistant.privacy.detect import Finding

PLACEHOLDER = re.compile(r"<([A-Z]+)_(\d+)>")
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


def normalise(value: str) -> str:
    return " ".join(value.casefold().split())


_NOT_NAMES = COMMON_WORDS - {"may", "will"}  # May, Will: names too


def name_parts(value: str) -> list[str]:
    """The words of a name worth protecting on their own (no initials, titles or
    common words)."""
    words = re.findall(r"[^\W\d_](?:[^\W\d_]|['-])*", value)
    return [
        w
        for w in words
        if len(w) >= 3
        and w.casefold().rstrip(".") not in _NAME_TITLES
        and w.casefold() not in _NOT_NAMES
    ]


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

    def _replace(self, text: str, value: str, ph: str, entity: str) -> str:
        if len(value.strip()) >= 3:
            text = re.sub(rf"(?<!\w){re.escape(value)}(?!\w)", ph, text, flags=re.IGNORECASE)
        if self.tag_of(entity) == "PERSON":
            for part in name_parts(value):
                for form in {part, part.upper(), part[:1].upper() + part[1:]}:
                    text = re.sub(rf"(?<!\w){re.escape(form)}(?!\w)", ph, text)
        return text

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
        """Put the original values back in place of (possibly mangled) placeholders."""
        pattern = self._pattern()
        if pattern is None or not text:
            return text

        def put_back(m: re.Match[str]) -> str:
            tag, number = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            found = self._values.get(f"<{tag.upper()}_{int(number)}>")
            return found[1] if found else m.group(0)

        return pattern.sub(put_back, text)

    def restore_all(self, texts: Iterable[str]) -> list[str]:
        return [self.restore(t) for t in texts]

    def dump(self) -> dict[str, Any]:
        """The whole mapping, for the sealed store (assistant.store); values included."""
        return {
            "values": {ph: [entity, value] for ph, (entity, value) in self._values.items()},
            "by_value": [[tag, norm, ph] for (tag, norm), ph in self._by_value.items()],
            "counters": dict(self._counters),
        }

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
