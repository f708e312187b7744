"""The privacy benchmark's datasets: the bundled set, presidio-research, PUPA's CSV and
any JSONL; and the seen/unseen splits, each rule with its provenance."""

from __future__ import annotations

import csv
import json
import re
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
            units = [u.strip() for u in (r["pii_units"] or "").split("||")]
            pii = tuple(("UNIT", u) for u in units if u and not _ALREADY_REDACTED.search(u))
            items.append(
                Item(
                    f"{path.stem}/{n}",  # conversation hashes repeat: one per query
                    r["user_query"],
                    pii,
                    control=not pii,
                    reference=r.get("redacted_query") or None,
                    # The half of PUPA-TNB whose leaks were read to write the rules.
                    seen=r["conversation_hash"][:1] in PUPA_LOOKED_AT
                    if r.get("conversation_hash")
                    else None,
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
