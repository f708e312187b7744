"""Paired figures of a `drag bench local-docs` run with several rows: per row, right
answers, answer seconds p50 (nearest rank), prompt tokens p50; per pair of rows, the
questions only one of them got right (exact two-sided McNemar p), and the share of
questions on which the first row was faster.

    python3 pairs.py local-docs-items.jsonl
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict
from itertools import combinations


def row(item: dict) -> str:
    read = item["read_tokens"]
    name = f"{item['method']}, " + ("whole passages" if read == 0 else f"{read} tokens")
    return name if "headings" not in item else f"{name}, {item['headings']} headings"


def p50(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[math.ceil(len(ordered) / 2) - 1]


def mcnemar(b: int, c: int) -> float:
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


def main(path: str) -> None:
    by: dict[str, dict[str, dict]] = defaultdict(dict)
    with open(path, encoding="utf-8") as handle:
        for item in map(json.loads, handle):
            by[row(item)][item["question"]] = item
    shared = set.intersection(*(set(v) for v in by.values()))
    print(f"{len(shared)} questions read by every row")
    for name, items in by.items():
        mine = [items[q] for q in shared]
        print(
            f"{name}: right {sum(i['right'] for i in mine)}, "
            f"seconds p50 {p50([i['seconds'] for i in mine]):.2f}, "
            f"prompt tokens p50 {p50([i['prompt_tokens'] or 0 for i in mine]):.0f}, "
            f"Null right {sum(i['right'] for i in mine if i['type'] == 'Null')}"
            f" of {sum(i['type'] == 'Null' for i in mine)}"
        )
    for a, b in combinations(by, 2):
        only_a = sum(by[a][q]["right"] and not by[b][q]["right"] for q in shared)
        only_b = sum(by[b][q]["right"] and not by[a][q]["right"] for q in shared)
        faster = sum(by[a][q]["seconds"] < by[b][q]["seconds"] for q in shared)
        ratio = sum(by[a][q]["seconds"] for q in shared) / sum(by[b][q]["seconds"] for q in shared)
        print(
            f"{a} | {b}: right only in the first {only_a}, only in the second {only_b} "
            f"(McNemar p = {mcnemar(only_a, only_b):.3f}); the first faster on {faster}; "
            f"seconds in all, first/second {ratio:.3f}"
        )


if __name__ == "__main__":
    main(sys.argv[1])
