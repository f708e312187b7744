"""Issue 51, the REPORT half: one run's replies judged three ways, scored by the
benchmark's scorer (drag_bench.localdocs.scoring: it imports nothing from the product):

- **words**: the word check alone (an answer held back by the sureness alone put back);
- **product**: the run as it is (the word check, and an answer held back where one of
  its tokens' log-probabilities is below -2.0);
- **mean**: the product, and an answer the word check lets through held back where the
  mean of its tokens' log-probabilities is below -0.35 (the second rule, not kept).

Which rule holds what back is read from the record the check keeps (support: said,
found, covered, day, passage, logprobs) by the rules as docs/benchmarks.md states them,
not by the product's code.  The replies do not depend on the check.

    python3 compare.py DIR/local-docs-items.jsonl > compare.txt   # bench/ on PYTHONPATH
"""

from __future__ import annotations

import json
import math
import sys

from drag_bench.localdocs.scoring import score

HELD = "Your files do not say."
LOWEST_AT = -2.0
MEAN_AT = -0.35


def by_words(s: dict) -> bool:
    """The check's word rules (a quarter, a fifth, the day, nothing read)."""
    if not s["passage"] or s["day"] is False:
        return True
    return bool(s["said"] and s["found"] < 0.25) or s["covered"] < 0.2


def mcnemar(b: int, c: int) -> float:
    n = b + c
    if not n:
        return 1.0
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n)


def main(path: str) -> None:
    items = [json.loads(line) for line in open(path, encoding="utf-8")]
    ways: dict[str, list[tuple[dict, str, object]]] = {"words": [], "product": [], "mean": []}
    held_by: dict[str, list[tuple[dict, str]]] = {"product": [], "mean": []}
    for r in items:
        s = r["support"]
        answer = s.get("unsupported", r["reply"])  # what the student wrote
        words = HELD if by_words(s) else answer
        lp = s["logprobs"]
        low = bool(lp) and min(lp) < LOWEST_AT
        mean = bool(lp) and sum(lp) / len(lp) < MEAN_AT
        product = HELD if words != HELD and low else words
        assert product == r["reply"] or (product == HELD and r["reply"] == answer == HELD), r
        with_mean = HELD if product != HELD and mean else product
        for way, reply in (("words", words), ("product", product), ("mean", with_mean)):
            ways[way].append((r, reply, score(reply, r["gold"], r["type"])))
        if product != words:
            held_by["product"].append((r, answer))
        if with_mean != product:
            held_by["mean"].append((r, answer))
    for way, scored in ways.items():
        n = len(scored)
        right = sum(v.right for _, _, v in scored)
        null = [v for r, _, v in scored if r["type"] == "Null"]
        errors = sum(v.error for _, _, v in scored)
        answerable = [reply for r, reply, _ in scored if r["type"] != "Null"]
        back = sum(reply == HELD for reply in answerable)
        print(
            f"{way}: right {right} of {n} ({100 * right / n:.1f} %); Null "
            f"{sum(v.right for v in null)} of {len(null)}; errors {errors} "
            f"({100 * errors / n:.1f} %); answerable held back {back} of {len(answerable)} "
            f"({100 * back / len(answerable):.1f} %)"
        )
    for a, b in (("product", "words"), ("mean", "product")):
        only_a = sum(x[2].right and not y[2].right for x, y in zip(ways[a], ways[b]))
        only_b = sum(y[2].right and not x[2].right for x, y in zip(ways[a], ways[b]))
        print(f"{a} against {b}: right with {a} alone {only_a}, with {b} alone {only_b} "
              f"(exact McNemar p = {mcnemar(only_a, only_b):.3f})")
    for way, rows in held_by.items():
        print(f"held back by {way}'s rule alone: {len(rows)}")
        for r, answer in rows:
            lp = r["support"]["logprobs"]
            verdict = score(answer, r["gold"], r["type"])
            print(f"  [{r['type']}] lowest {min(lp):.3f}, mean {sum(lp) / len(lp):.3f}; the "
                  f"answer {'right' if verdict.right else 'wrong'}: {r['question']}")


if __name__ == "__main__":
    main(sys.argv[1])
