"""Two rows of one run side by side, question by question (see command.txt).

python3 compare.py [DIR [ROW ROW]]   (bench/ on PYTHONPATH; DIR: the run's folder, this
one by default; the rows' prompts, "rules examples" by default)

Counts each row's right replies, errors, Null right, answerable questions held back and
answer seconds (median), then the questions where only one row was right (exact McNemar),
the replies word for word the same, and the time of all answers, row against row.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path

from drag_bench.localdocs import rescore

HERE = Path(__file__).resolve().parent


def mcnemar(b: int, c: int) -> float:
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


def main(folder: Path, base: str, tried: str) -> None:
    items = [rescore(r) for r in map(json.loads, (folder / "local-docs-items.jsonl").open())]
    by = {row: {i["question"]: i for i in items if i.get("prompt") == row} for row in (base, tried)}
    asked = sorted(set(by[base]) & set(by[tried]))
    for row in (base, tried):
        got = [by[row][q] for q in asked]
        answerable = [i for i in got if i["type"] != "Null"]
        print(
            f"{row}: right {sum(i['right'] for i in got)} of {len(got)}, "
            f"errors {sum(i['error'] for i in got)}, "
            f"Null right {sum(i['right'] for i in got if i['type'] == 'Null')} of "
            f"{len(got) - len(answerable)}, "
            f"answerable held back {sum(i['held_back'] for i in answerable)} of "
            f"{len(answerable)}, answer s p50 {statistics.median(i['seconds'] for i in got):.2f}"
        )
    alone = {
        row: sum(by[row][q]["right"] and not by[other][q]["right"] for q in asked)
        for row, other in ((base, tried), (tried, base))
    }
    same = sum(by[base][q]["reply"] == by[tried][q]["reply"] for q in asked)
    faster = sum(by[tried][q]["seconds"] < by[base][q]["seconds"] for q in asked)
    total = {row: sum(by[row][q]["seconds"] for q in asked) for row in (base, tried)}
    print(
        f"right only with {base} {alone[base]}, only with {tried} {alone[tried]} "
        f"(exact McNemar p = {mcnemar(alone[base], alone[tried]):.3f}); "
        f"{same} of {len(asked)} replies word for word the same; {tried} faster on "
        f"{faster}; time in all, {tried} / {base} = {total[tried] / total[base]:.3f}"
    )


if __name__ == "__main__":
    args = sys.argv[1:]
    main(
        Path(args[0]) if args else HERE,
        *(args[1:3] if len(args) >= 3 else ("rules", "examples")),
    )
