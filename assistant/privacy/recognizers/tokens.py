"""Rules that read spaCy's tokens of a line: rare proper nouns, and names addressed.
Each is set from its section of ``policy.yaml``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from assistant.privacy.findings import Finding
from assistant.privacy.recognizers.common import Scan, option_label, unknown

_SENTENCE_END = {".", "!", "?", '"', "“", "(", "-", "–"}


@dataclass(frozen=True)
class RareWordRule:
    """A capitalised proper noun (spaCy's tag) that the model's word vectors know in no
    case ("Xignite", "Dzhambek", "Navrátilová") is a name of some kind: a person, a
    company, a street.  Found as ``entity`` when it has at least ``min_letters``."""

    entity: str = ""
    min_letters: int = 4
    score: float = 0.6

    def takes(self, scan: Scan, tok: Any, option_word: int) -> bool:
        """Whether token ``tok`` is such a word (not the first word of an answer option,
        at ``option_word``: capitalised as any option is, it tells nothing of a name)."""
        return (
            bool(self.entity)
            and scan.accepts(self.entity, tok.text, self.score)
            and tok.idx != option_word
            and unknown(tok.doc.vocab, tok.text, self.min_letters)
        )


@dataclass(frozen=True)
class VocativeRule:
    """A proper noun that opens a sentence, followed by a comma and one of
    ``next_words`` ("Leif, can I please speak to your boss?"): someone addressed."""

    entity: str = ""
    next_words: tuple[str, ...] = ()
    score: float = 0.6

    def takes(self, scan: Scan, doc: Any, i: int) -> bool:
        """Whether the ``i``-th token of ``doc`` is someone addressed."""
        return (
            bool(self.entity)
            and (i == 0 or doc[i - 1].text in _SENTENCE_END)
            and i + 2 < len(doc)
            and doc[i + 1].text == ","
            and doc[i + 2].lower_ in self.next_words
            and scan.accepts(self.entity, doc[i].text, self.score)
        )


def find_in_tokens(
    scan: Scan, offset: int, doc: Any, rare: RareWordRule, vocative: VocativeRule
) -> list[Finding]:
    """The rare proper nouns and names addressed in ``doc``, the tokens of the line at
    ``offset``: a word is one or the other, the rare-word rule first."""
    found = []
    text = doc.text
    option = option_label(text)
    option_word = len(text) - len(text[option.end() :].lstrip()) if option else -1
    for i, tok in enumerate(doc):
        if tok.pos_ != "PROPN" or not tok.is_alpha or not tok.text[:1].isupper():
            continue
        if scan.allowed(tok.text):
            continue
        start = offset + tok.idx
        if rare.takes(scan, tok, option_word):
            found.append(
                Finding(rare.entity, start, start + len(tok), tok.text, rare.score, "RareWord")
            )
        elif vocative.takes(scan, doc, i):
            found.append(
                Finding(
                    vocative.entity, start, start + len(tok), tok.text, vocative.score, "Vocative"
                )
            )
    return found
