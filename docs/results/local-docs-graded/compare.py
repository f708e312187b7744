"""The graders' labels beside the benchmark's scorer: the figures of docs/benchmarks.md,
"Two graders read the replies".

    PYTHONPATH=bench python3 docs/results/local-docs-graded/compare.py > compare.txt

A reply the graders call "right", or "abstain" on a question with no answer in the
chats (Null), is right; "wrong" is an error (a wrong reply that claims something).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from blind import SETS, items  # noqa: E402
from drag_bench.localdocs.scoring import score  # noqa: E402

GRADERS = {  # each set, its two graders (each saw only rubric.md and the blind file)
    "dayfirst-tune": ("A", "B"),
    "dayfirst-report": ("A", "B"),
    "vector500-report": ("C", "D"),
    "extractive-tune": ("C", "D"),
}


def labels(grader: str, name: str) -> list[dict]:
    path = HERE / f"{grader}-{name}.jsonl"
    rows = [json.loads(line) for line in path.open(encoding="utf-8")]
    assert [r["n"] for r in rows] == list(range(len(rows))), path
    return rows


def right(label: str, kind: str) -> bool:
    return label == "right" or (label == "abstain" and kind == "Null")


def main() -> None:
    for name in SETS:
        rows = items(name)
        one, two = (labels(g, name) for g in GRADERS[name])
        assert len(one) == len(two) == len(rows), name
        graded = [
            (right(a["label"], r["type"]), right(b["label"], r["type"]))
            for a, b, r in zip(one, two, rows, strict=True)
        ]
        v1 = [
            score(r["reply"], r["gold"], r["type"], r["question"], scorer="words-v1") for r in rows
        ]
        v2 = [
            score(r["reply"], r["gold"], r["type"], r["question"], scorer="words-v2") for r in rows
        ]
        assert [v.right for v in v1] == [r["right"] for r in rows], "the stored verdicts are v1's"
        agreed = [i for i, (a, b) in enumerate(graded) if a == b]
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
            print(
                f"grader {g}: right {sum(ok)} ({100 * sum(ok) / n:.1f} %), "
                f"errors {wrong} ({100 * wrong / n:.1f} %), "
                f"Null right {sum(ok[i] for i in nulls)} of {len(nulls)}, "
                f"answerable abstained {held} of {n - len(nulls)}"
            )
        for label, verdicts in (("words-v1", v1), ("words-v2", v2)):
            ok = sum(v.right for v in verdicts)
            err = sum(v.error for v in verdicts)
            agree = sum(verdicts[i].right == graded[i][0] for i in agreed)
            print(
                f"scorer {label}: right {ok} ({100 * ok / n:.1f} %), errors {err} "
                f"({100 * err / n:.1f} %), agrees with both graders on {agree} of {len(agreed)}"
            )
        print(f"the graders agree on {len(agreed)} of {n}")
        for i in agreed:
            if v1[i].right != v2[i].right:
                print(f"  v1 {v1[i].right} -> v2 {v2[i].right} (graders {graded[i][0]}): n{i}")
        print()


if __name__ == "__main__":
    main()
