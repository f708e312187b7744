"""Generate the LiHuaWorld privacy set: MiniRAG's dev questions, each with the names of
LiHuaWorld's people it holds, as ``drag bench privacy --dataset FILE.jsonl`` reads it.

The people are the chats' senders (``WolfgangSchulz: …`` lines; a joined name is also
read spaced, "Wolfgang Schulz").  A question's units are every sender's name, spaced or
joined, or a part of it (a first or last name of three letters or more), that the
question writes as a word with a capital letter, longest first.  With LiHuaWorld
indexed (``drag index``), a question about its people should carry none of them to the
teacher: ``drag bench privacy --learnt-from INDEX.db`` measures it.  Nothing here
comes from the product's code (the name rules are the data's own).

``--text`` writes the second set: every chat line that writes a name found only in
the chats' text (a firm, an address, a place of the user's life; never a sender),
each with those names and the senders' names it holds as units.  Those names were
labelled by hand (``data/lihua_text_names.json``) from the capitalised words and
phrases the chats write inside a sentence that are not a sender's name
(``--candidates`` lists them, with their counts).

    python -m drag_bench.make_lihua_privacy --lihua ../shared/data/lihuaworld
    python -m drag_bench.make_lihua_privacy --lihua ../shared/data/lihuaworld --text
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

DEFAULT_OUT = Path(__file__).with_name("data") / "privacy_lihua.jsonl"
DEFAULT_TEXT_OUT = DEFAULT_OUT.with_name("privacy_lihua_text.jsonl")
TEXT_NAMES = DEFAULT_OUT.with_name("lihua_text_names.json")
DEFAULT_LIHUA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "lihuaworld"
SENDER = re.compile(r"^([A-Z][A-Za-z'-]{1,39}):", re.MULTILINE)
LINE = re.compile(r"^([A-Z][A-Za-z'-]{1,39}):[ \t]*(.*)$", re.MULTILINE)
# A capitalised word or phrase that does not open a sentence: what was read by hand.
CAPITALISED = re.compile(
    r"(?<![.!?]\s)\b([A-Z][a-zA-Z'’&-]+(?:\s+(?:of|the|de|&)?\s*[A-Z][a-zA-Z'’&-]+)*)"
)
I_FORMS = frozenset({"I", "I'm", "I’m", "I'll", "I’ll", "I've", "I’ve", "I'd", "I’d"})


def senders(chats: Path) -> set[str]:
    found: set[str] = set()
    for path in sorted(chats.rglob("*.txt")):
        found.update(SENDER.findall(path.read_text("utf-8")))
    found.discard("Time")
    return found


def spellings(sender: str) -> set[str]:
    """A sender as the questions may write them: joined, spaced, or one part."""
    parts = re.findall(r"[A-Z][a-z'-]*", sender)
    out = {sender, " ".join(parts)}
    out.update(p for p in parts if len(p) >= 3)
    return out


def units(question: str, names: set[str]) -> list[str]:
    """The names ``question`` holds as capitalised words, longest first, none inside
    another one taken."""
    taken: list[tuple[int, int]] = []
    out: list[str] = []
    for name in sorted(names, key=lambda n: (-len(n), n)):
        for m in re.finditer(rf"(?<![\w-]){re.escape(name)}(?![\w-])", question):
            if any(a < m.end() and m.start() < b for a, b in taken):
                continue
            taken.append(m.span())
            if name not in out:
                out.append(name)
    return out


def generate(lihua: Path) -> list[dict[str, object]]:
    names = all_spellings(lihua / "LiHua-World")
    with (lihua / "lihua_dev.csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return [
        {
            "id": f"lihua-dev-{n}",
            "text": r["Question"].strip(),
            "pii": [{"type": "PERSON", "value": u} for u in units(r["Question"], names)],
        }
        for n, r in enumerate(rows)
    ]


def said(chats: Path) -> Iterator[tuple[Path, int, str]]:
    """Every message of the chats: (file, its number in the file, text after the sender)."""
    for path in sorted(chats.rglob("*.txt")):
        lines = (m for m in LINE.finditer(path.read_text("utf-8")) if m.group(1) != "Time")
        for number, m in enumerate(lines):
            yield path, number, m.group(2).strip()


def all_spellings(chats: Path) -> set[str]:
    names: set[str] = set()
    for sender in senders(chats):
        names |= spellings(sender)
    return names


def candidates(chats: Path) -> Counter[str]:
    """The capitalised words and phrases inside the chats' sentences that are no
    sender's name, with their counts: the list the text names were labelled from."""
    known = all_spellings(chats) | I_FORMS
    found: Counter[str] = Counter()
    for _path, _number, text in said(chats):
        found.update(
            m.group(1)
            for m in CAPITALISED.finditer(text)
            if m.start() > 0 and m.group(1) not in known
        )
    return found


def generate_text(lihua: Path, labelled: dict[str, str]) -> list[dict[str, object]]:
    """The messages that write a hand-labelled text name; units: those names (their
    labelled type) and the senders' names the message holds (PERSON)."""
    chats = lihua / "LiHua-World"
    typed = dict.fromkeys(all_spellings(chats), "PERSON") | labelled
    items: list[dict[str, object]] = []
    for path, number, text in said(chats):
        if not units(text, set(labelled)):
            continue
        items.append(
            {
                "id": f"lihua-text-{path.parent.name}-{path.stem}-{number}",
                "text": text,
                "pii": [{"type": typed[u], "value": u} for u in units(text, set(typed))],
            }
        )
    return items


def labels(path: Path = TEXT_NAMES) -> dict[str, str]:
    data = json.loads(path.read_text("utf-8"))
    return {n["value"]: n["type"] for n in data["names"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lihua", type=Path, default=DEFAULT_LIHUA)
    parser.add_argument("--out", type=Path)
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--text", action="store_true", help="the names in the chats' text")
    how.add_argument("--candidates", action="store_true", help="list what was labelled from")
    args = parser.parse_args(argv)
    if not (args.lihua / "lihua_dev.csv").is_file():
        print(f"make_lihua_privacy: error: no LiHuaWorld at {args.lihua}", file=sys.stderr)
        return 2
    if args.candidates:
        for name, count in candidates(args.lihua / "LiHua-World").most_common():
            print(f"{count}\t{name}")
        return 0
    if args.text:
        args.out = args.out or DEFAULT_TEXT_OUT
        items = generate_text(args.lihua, labels())
    else:
        args.out = args.out or DEFAULT_OUT
        items = generate(args.lihua)
    text = "".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items)
    args.out.write_text(text, encoding="utf-8")
    with_names = sum(bool(i["pii"]) for i in items)
    print(f"{len(items)} items, {with_names} naming LiHuaWorld's people or places: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
