"""The privacy benchmark's datasets: the bundled set, presidio-research, PUPA's CSV and
any JSONL; and the seen/unseen splits, each rule with its provenance."""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from drag_bench.make_privacy_set import DEFAULT_MMLU, full_text

METHODS = ("full", "reader", "presidio", "rewrite")
# presidio-research labels that are personal data in this product's policy (GPE, dates,
# titles, ages and nationalities are left in questions on purpose: see policy.yaml).
PRESIDIO_RESEARCH_SCOPE = {
    "PERSON",
    "STREET_ADDRESS",
    "ORGANIZATION",
    "CREDIT_CARD",
    "PHONE_NUMBER",
    "EMAIL_ADDRESS",
    "IBAN_CODE",
    "US_SSN",
    "IP_ADDRESS",
    "US_DRIVER_LICENSE",
}


@dataclass(frozen=True)
class Item:
    id: str
    text: str
    pii: tuple[tuple[str, str], ...]  # (entity type, value)
    control: bool = False
    reference: str | None = None  # another redaction of the same text (PUPA's)
    # Whether the rules were written from this item's misses (None: no split known).
    seen: bool | None = None


PUPA_TNB = DEFAULT_MMLU.parent / "pupa" / "PUPA_TNB.csv"
# Units that are a redaction already ("<PRESIDIO_ANONYMIZED_PERSON>"): nothing to leak.
_ALREADY_REDACTED = re.compile(r"presidio_anonymi[sz]ed|^\s*[<\[].*[>\]]\s*$", re.IGNORECASE)
# presidio-research: rules were written from the misses of items 0-749 (see README).
PRESIDIO_LOOKED_AT = 750
PUPA_LOOKED_AT = frozenset("01234567")  # first hex digit of the conversation hash
# PUPA-TNB is split by person, not only by conversation (issue 31): a conversation whose
# hash puts it in the unseen half goes to the seen half with everything it is linked to,
# when it shares a PII unit with a seen query or is a near-duplicate of one (cosine >= 0.9
# under the bundled all-MiniLM-L6-v2).  On PUPA_TNB.csv that moves 13 queries of 11
# conversations (13 shared units: belal, centric brands, closed ai, dubai, elon musk,
# facebook, florida, germany, india, lauderhill, msitu africa, oakland park, sarah; one
# near-duplicate pair, the two "I'm Belal, a GP doctor" queries), and leaves 95 unseen.
# `person_groups` computes the list from the CSV; the test that recomputes it is
# tests/test_privacy_split.py.
PUPA_NEAR_DUPLICATE = 0.9
PUPA_MOVED = frozenset(
    {
        "83493f042c2d11ef96b5c6540108ce4a",
        "83a601029afb9199033693c3a863439b",
        "83d77207b1048453422f966586a7615b",
        "be14cf21db127197a402065df223796b",
        "c1dca35d56b793ccd4b2e293e4841cbe",
        "c63c9d755f12c76adea9a3f0e2d37b8e",
        "c82b0aa47f0436fbad24573c7df1611b",
        "cbc4e01247961ee080f6de2776a3ef7a",
        "d3b45457ca2dc6595ddc445daad490c1",
        "eb482f4c1de3ca342b4333be8dd33516",
        "f4cf8b1a5216488959a7f1f6e17a68d0",
    }
)


def pupa_units(field: str) -> tuple[str, ...]:
    """A PUPA row's ``pii_units`` (joined by ``||``), without those that are a redaction
    already."""
    units = (u.strip() for u in (field or "").split("||"))
    return tuple(u for u in units if u and not _ALREADY_REDACTED.search(u))


def person_groups(
    hashes: Sequence[str],
    units: Sequence[Sequence[str]],
    similarity: Callable[[int, int], float],
) -> set[str]:
    """The conversations of the unseen half (by hash) linked to the seen half: through
    the same conversation, a shared PII unit (case folded) or a near-duplicate query
    (``similarity`` of two rows at least PUPA_NEAR_DUPLICATE), transitively."""
    parent = list(range(len(hashes)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    folded = [{u.casefold() for u in row} for row in units]
    for i in range(len(hashes)):
        for j in range(i + 1, len(hashes)):
            linked = (
                hashes[i] == hashes[j]
                or bool(folded[i] & folded[j])
                or similarity(i, j) >= PUPA_NEAR_DUPLICATE
            )
            if linked:
                parent[root(i)] = root(j)
    seen_roots = {root(i) for i, h in enumerate(hashes) if h[:1] in PUPA_LOOKED_AT}
    return {
        h for i, h in enumerate(hashes) if h[:1] not in PUPA_LOOKED_AT and root(i) in seen_roots
    }


def pupa_seen(conversation_hash: str) -> bool:
    """Whether the rules were written from this conversation's misses, or from those of
    a conversation it is linked to (see PUPA_MOVED)."""
    return conversation_hash[:1] in PUPA_LOOKED_AT or conversation_hash in PUPA_MOVED


def bundled_path() -> Path:
    return Path(str(resources.files("drag_bench") / "data" / "privacy_mmlu.jsonl"))


def load_bundled(path: Path | None = None) -> list[Item]:
    items = []
    for line in (path or bundled_path()).read_text("utf-8").splitlines():
        r = json.loads(line)
        pii = tuple((p["type"], p["value"]) for p in r["pii"])
        items.append(Item(r["id"], full_text(r), pii, control=not pii))
    return items


def load_presidio_research(path: Path) -> list[Item]:
    data = json.loads(path.read_text("utf-8"))
    looked_at = {r.get("template_id") for r in data[:PRESIDIO_LOOKED_AT]}
    items = []
    for n, r in enumerate(data):
        pii = tuple(
            (s["entity_type"], s["entity_value"])
            for s in r["spans"]
            if s["entity_type"] in PRESIDIO_RESEARCH_SCOPE
        )
        items.append(
            Item(
                f"presidio-research/{n}",
                r["full_text"],
                pii,
                control=not r["spans"],
                seen=r.get("template_id") in looked_at,
            )
        )
    return items


def split_items(items: list[Item], split: str) -> list[Item]:
    """``seen``: the items the rules were written from; ``unseen``: the others;
    ``all``: every item."""
    if split == "all":
        return items
    if any(i.seen is None for i in items):
        raise ValueError(f"--split {split}: this dataset has no seen/unseen split")
    return [i for i in items if i.seen == (split == "seen")]


def load_csv(path: Path) -> list[Item]:
    """PUPA's CSV: ``user_query`` and ``pii_units`` (joined by ``||``); its
    ``redacted_query`` is kept as the reference redaction."""
    items = []
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        missing = {"user_query", "pii_units"} - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path}: no column {', '.join(sorted(missing))}")
        for n, r in enumerate(reader):
            pii = tuple(("UNIT", u) for u in pupa_units(r["pii_units"]))
            items.append(
                Item(
                    f"{path.stem}/{n}",  # conversation hashes repeat: one per query
                    r["user_query"],
                    pii,
                    control=not pii,
                    reference=r.get("redacted_query") or None,
                    # The half of PUPA-TNB whose leaks were read to write the rules,
                    # and what is linked to it.
                    seen=pupa_seen(r["conversation_hash"]) if r.get("conversation_hash") else None,
                )
            )
    return items


def load_jsonl(path: Path) -> list[Item]:
    """Generic: one ``{"text": ..., "pii": ["value", ...]}`` per line (types optional)."""
    items = []
    for n, line in enumerate(path.read_text("utf-8").splitlines()):
        if not line.strip():
            continue
        r = json.loads(line)
        pii = tuple(
            (p.get("type", "UNKNOWN"), p["value"]) if isinstance(p, dict) else ("UNKNOWN", str(p))
            for p in r.get("pii", [])
        )
        items.append(Item(str(r.get("id", n)), r["text"], pii, control=not pii))
    return items


def load_dataset(name: str) -> list[Item]:
    if name == "bundled":
        return load_bundled()
    if name == "presidio":
        return load_presidio_research(
            DEFAULT_MMLU.parent / "presidio_research" / "synth_dataset_v2.json"
        )
    if name == "pupa":
        return load_csv(PUPA_TNB)
    path = Path(name)
    if path.suffix == ".json":
        return load_presidio_research(path)
    if path.suffix == ".csv":
        return load_csv(path)
    return load_jsonl(path)
