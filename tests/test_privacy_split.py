"""PUPA-TNB is split by person (issue 31): what is linked to the seen half (the same
conversation, a shared PII unit, a near-duplicate query) is on the seen side."""

from __future__ import annotations

import csv

import numpy as np
from drag_bench import privacy as leakage
from drag_bench.privacy import datasets

from assistant.models.embedder import load


def test_person_groups_follow_shared_units_and_near_duplicates_transitively() -> None:
    hashes = ["0seen", "8shares-a-unit", "9linked-through-8", "asimilar", "bapart", "0seen"]
    units = [["Ada Lovelace"], ["ada lovelace", "Paris"], ["paris"], [], ["Bo"], []]
    close = {(0, 3)}  # a near-duplicate of a seen query

    def similarity(i: int, j: int) -> float:
        return 0.95 if (i, j) in close else 0.2

    moved = datasets.person_groups(hashes, units, similarity)
    assert moved == {"8shares-a-unit", "9linked-through-8", "asimilar"}


def test_the_pupa_split_moves_what_the_seen_half_is_linked_to() -> None:
    """The list in datasets.py is what person_groups gives on PUPA_TNB.csv with the
    bundled embedder; the loader puts those conversations on the seen side."""
    path = datasets.PUPA_TNB
    assert path.is_file(), f"{path}: the shared data is missing"
    with path.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    vectors = load().embed([r["user_query"] for r in rows])
    vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cosine = vectors @ vectors.T
    hashes = [r["conversation_hash"] for r in rows]
    units = [datasets.pupa_units(r["pii_units"]) for r in rows]
    assert datasets.person_groups(hashes, units, lambda i, j: float(cosine[i, j])) == set(
        leakage.PUPA_MOVED
    )
    items = leakage.load_csv(path)
    unseen = leakage.split_items(items, "unseen")
    assert len(unseen) == 95 and len(leakage.split_items(items, "seen")) == 142
    seen_units = {u.casefold() for i in leakage.split_items(items, "seen") for _, u in i.pii}
    assert not seen_units & {u.casefold() for i in unseen for _, u in i.pii}
