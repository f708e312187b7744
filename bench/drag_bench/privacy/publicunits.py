"""Which benchmark units the product's rule calls public (issue 48): a listed company
or a well-known platform, by the lists the product ships (``assistant/privacy/data``).

The figures are reported with every unit and without these, and the units themselves
are listed per run, so that a unit cannot be moved into "public" unseen.  Only the
lists (data) are shared with the product; the matching here is this module's own, and
cruder: the unit as a whole, folded, against a list's name or short name, or a ticker
as written."""

from __future__ import annotations

import functools
from importlib import resources

from drag_bench.leakscore import fold

DATA = resources.files("assistant.privacy") / "data"


@functools.cache
def _lists() -> tuple[frozenset[str], frozenset[str]]:
    names: set[str] = set()
    tickers: set[str] = set()
    for line in (DATA / "public-orgs.tsv").read_text("utf-8").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, short, ticker, _index = line.split("\t")
        names.update((fold(name), fold(short)))
        tickers.add(ticker)
    for line in (DATA / "public-platforms.txt").read_text("utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            names.add(fold(line))
    return frozenset(names), frozenset(tickers)


def public_unit(unit: str) -> bool:
    names, tickers = _lists()
    text = unit.strip()
    return fold(text).removeprefix("the ") in names or (len(text) >= 2 and text in tickers)
