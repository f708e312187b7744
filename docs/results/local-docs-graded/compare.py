"""The graders' labels beside the benchmark's scorer, and the tried scorer_v2: the figures
of docs/benchmarks.md, "Two graders read the replies".

    PYTHONPATH=bench python3 docs/results/local-docs-graded/compare.py > compare.txt

A reply the graders call "right", or "abstain" on a question with no answer in the
chats (Null), is right; "wrong" is an error (a wrong reply that claims something).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import scorer_v2  # noqa: E402
from blind import SETS, items  # noqa: E402
from drag_bench.localdocs.scoring import score  # noqa: E402

GRADERS = {  # each set, its two graders (each saw only rubric.md and the blind file)
    "dayfirst-tune": ("A", "B"),
    "dayfirst-report": ("A", "B"),
    "vector500-report": ("C", "D"),
    "extractive-tune": ("C", "D"),
}
READ = {"tune": "dayfirst-tune", "report": "dayfirst-report"}  # read for v2's rules
TESTS = ("vector500-report", "extractive-tune")


def labels(grader: str, name: str) -> list[dict]:
    path = HERE / f"{grader}-{name}.jsonl"
    rows = [json.loads(line) for line in path.open(encoding="utf-8")]
    assert [r["n"] for r in rows] == list(range(len(rows))), path
    return rows


def right(label: str, kind: str) -> bool:
    return label == "right" or (label == "abstain" and kind == "Null")


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    p = k / n
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return mid - half, mid + half


def graded(name: str) -> list[bool | None]:
    """Each reply's verdict where both graders agree, None where they do not."""
    rows = items(name)
    one, two = (labels(g, name) for g in GRADERS[name])
    assert len(one) == len(two) == len(rows), name
    out: list[bool | None] = []
    for a, b, r in zip(one, two, rows, strict=True):
        x, y = right(a["label"], r["type"]), right(b["label"], r["type"])
        out.append(x if x == y else None)
    return out


def main() -> None:
    for name in SETS:
        rows = items(name)
        one, two = (labels(g, name) for g in GRADERS[name])
        agreed = graded(name)
        v1 = [score(r["reply"], r["gold"], r["type"]) for r in rows]
        v2 = [scorer_v2.score(r["reply"], r["gold"], r["type"], r["question"]) for r in rows]
        assert [v.right for v in v1] == [r["right"] for r in rows], "the stored verdicts are v1's"
        n, nulls = len(rows), [i for i, r in enumerate(rows) if r["type"] == "Null"]
        print(f"## {name}: {n} replies ({len(nulls)} Null)")
        for g, labelled in zip(GRADERS[name], (one, two), strict=True):
            ok = [right(x["label"], r["type"]) for x, r in zip(labelled, rows, strict=True)]
            wrong = sum(x["label"] == "wrong" for x in labelled)
            held = sum(
                x["label"] == "abstain"
                for x, r in zip(labelled, rows, strict=True)
                if r["type"] != "Null"
            )
            low, high = wilson(sum(ok), n)
            print(
                f"grader {g}: right {sum(ok)} ({100 * sum(ok) / n:.1f} %; 95 % interval "
                f"{100 * low:.1f}-{100 * high:.1f} %), errors {wrong} ({100 * wrong / n:.1f} %), "
                f"Null right {sum(ok[i] for i in nulls)} of {len(nulls)}, "
                f"answerable abstained {held} of {n - len(nulls)}"
            )
        same = sum(a["label"] == b["label"] for a, b in zip(one, two, strict=True))
        print(f"the graders give the same label to {same} of {n}")
        for label, verdicts in (("words-v1", v1), ("words-v2 (tried)", v2)):
            ok = sum(v.right for v in verdicts)
            err = sum(v.error for v in verdicts)
            both = [i for i, g in enumerate(agreed) if g is not None]
            agree = sum(verdicts[i].right == agreed[i] for i in both)
            print(
                f"scorer {label}: right {ok} ({100 * ok / n:.1f} %), errors {err} "
                f"({100 * err / n:.1f} %), agrees with both graders on {agree} of {len(both)}"
            )
        for i, g in enumerate(agreed):
            if g is not None and v1[i].right != v2[i].right:
                print(f"  v1 {v1[i].right} -> v2 {v2[i].right} (graders {g}): n{i}")
        print()
    # The test set, less the replies the rules' writers had read: a test reply written
    # word for word as the read run's reply to the same question.
    print("## the test sets less the replies read for the rules")
    tally = [0, 0, 0]
    for name in TESTS:
        read = {r["question"]: r["reply"] for r in items(READ[name.rsplit("-", 1)[1]])}
        rows, agreed = items(name), graded(name)
        fresh = [
            i
            for i, r in enumerate(rows)
            if agreed[i] is not None and read.get(r["question"]) != r["reply"]
        ]
        v1 = sum(
            score(rows[i]["reply"], rows[i]["gold"], rows[i]["type"]).right == agreed[i]
            for i in fresh
        )
        v2 = sum(
            scorer_v2.score(
                rows[i]["reply"], rows[i]["gold"], rows[i]["type"], rows[i]["question"]
            ).right
            == agreed[i]
            for i in fresh
        )
        same = sum(1 for r in rows if read.get(r["question"]) == r["reply"])
        print(
            f"{name}: {same} of {len(rows)} replies as read; of the other {len(fresh)} "
            f"(both graders alike) words-v1 agrees on {v1}, words-v2 on {v2}"
        )
        tally = [tally[0] + len(fresh), tally[1] + v1, tally[2] + v2]
    print(f"in all: {tally[0]} replies, words-v1 agrees on {tally[1]}, words-v2 on {tally[2]}")


if __name__ == "__main__":
    main()
