"""Generate the LiHuaWorld privacy set: MiniRAG's dev questions, each with the names of
LiHuaWorld's people it holds, as ``drag bench privacy --dataset FILE.jsonl`` reads it.

The people are the chats' senders (``WolfgangSchulz: …`` lines; a joined name is also
read spaced, "Wolfgang Schulz").  A question's units are every sender's name, spaced or
joined, or a part of it (a first or last name of three letters or more), that the
question writes as a word with a capital letter, longest first.  With LiHuaWorld
indexed (``drag index``), a question about its people should carry none of them to the
teacher: ``drag bench privacy --learnt-from INDEX.db`` measures it.  Nothing here
comes from the product's code (the name rules are the data's own).

    python -m drag_bench.make_lihua_privacy --lihua ../shared/data/lihuaworld
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from pathlib import Path

DEFAULT_OUT = Path(__file__).with_name("data") / "privacy_lihua.jsonl"
DEFAULT_LIHUA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "lihuaworld"
SENDER = re.compile(r"^([A-Z][A-Za-z'-]{1,39}):", re.MULTILINE)


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
    names: set[str] = set()
    for sender in senders(lihua / "LiHua-World"):
        names |= spellings(sender)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lihua", type=Path, default=DEFAULT_LIHUA)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if not (args.lihua / "lihua_dev.csv").is_file():
        print(f"make_lihua_privacy: error: no LiHuaWorld at {args.lihua}", file=sys.stderr)
        return 2
    items = generate(args.lihua)
    text = "".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items)
    args.out.write_text(text, encoding="utf-8")
    with_names = sum(bool(i["pii"]) for i in items)
    print(f"{len(items)} questions, {with_names} naming LiHuaWorld's people: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
