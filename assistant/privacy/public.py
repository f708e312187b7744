"""The organisations this product calls public (issue 48), in one place.

A question about a listed company or a well-known platform needs its name ("compare
Siemens and ABB as investments", "how do I export my orders from Etsy?"): the name is
what the teacher must see to answer.  The same name is personal when the text ties it
to the writer ("I work at Siemens", "applying to Siemens"): then it is replaced like
any other (the detector's tie phrases, ``policy.yaml``'s ``contextual.public``).

Public is only what ships in two lists, never a guess:

* ``data/public-orgs.tsv``: the members of 20 stock indices with their tickers, from
  pytickersymbols 1.17.10 (MIT; index lists from Wikipedia), built by
  ``tools/make_public_orgs.py``;
* ``data/public-platforms.txt``: well-known platforms and services, hand-written.

A value matches as a whole, in any case, a listed name or its short form ("Apple" for
"Apple Inc."; the user's own "Hawkins & Co." is not "Hawkins, Inc."); a short
form of one word that spaCy reads as a person's name ("Rogers", "Hawkins") is not
listed (``tools/make_public_orgs.py``); a ticker of three letters or more matches only
as written, in capitals ("ORCL").
"""

from __future__ import annotations

import functools
import unicodedata
from pathlib import Path

DATA = Path(__file__).with_name("data")
ORGS_FILE = DATA / "public-orgs.tsv"
PLATFORMS_FILE = DATA / "public-platforms.txt"


def fold(name: str) -> str:
    """The key a name is looked up by: NFKC, case-folded, one space, no "the", no
    trailing dot or comma."""
    text = " ".join(unicodedata.normalize("NFKC", name).casefold().replace("’", "'").split())
    if text.startswith("the "):
        text = text[4:]
    return text.strip(" .,")


@functools.cache
def _lists() -> tuple[frozenset[str], frozenset[str]]:
    names: set[str] = set()
    tickers: set[str] = set()
    for line in ORGS_FILE.read_text("utf-8").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, short, ticker, _index = line.split("\t")
        names.update((fold(name), fold(short)))
        if len(ticker) >= 3 and ticker.isupper():  # "IT", "MS", "AI" are words
            tickers.add(ticker)
    for line in PLATFORMS_FILE.read_text("utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            names.add(fold(line))
    return frozenset(names), frozenset(tickers)


def public(value: str) -> bool:
    """Whether ``value`` names a public organisation: a listed company, a well-known
    platform, or a listed ticker written in capitals."""
    names, tickers = _lists()
    value = value.strip()
    return fold(value) in names or value in tickers
