"""Issue 51, the TUNE half: would holding back the answers the student was least sure
of leave more replies right?  Reads one run's items (the check as it is, each answer's
token log-probabilities under support.logprobs) and applies each candidate of the rule
written before the run (command.txt): hold back an answer the check let through when
the MEAN, or the LOWEST, of its tokens' log-probabilities is below t.

    python3 choose.py DIR/local-docs-items.jsonl > choose.txt

Scored by the benchmark's own scorer (drag_bench.localdocs.scoring: it imports nothing
from the product); run from the project root with the project's Python."""

from __future__ import annotations

import json
import statistics
import sys

from drag_bench.localdocs.scoring import abstains, score

HELD = "Your files do not say."
STATS = {"mean": statistics.fmean, "lowest": min}


def main(path: str) -> None:
    items = [json.loads(line) for line in open(path, encoding="utf-8")]
    answerable = [r for r in items if r["type"] != "Null"]
    right_answerable = sum(r["right"] for r in answerable)
    base_right = sum(r["right"] for r in items)
    bound = int(0.05 * right_answerable)
    print(f"{len(items)} items; right {base_right} with the check alone; answerable right "
          f"{right_answerable}: at most {bound} of them may be held back")
    # The answers the check let through, with what the student wrote.
    let = [r for r in items if not r["held_back"] and not abstains(r["reply"])]
    print(f"answers the check let through: {len(let)}")
    best = None
    rows = []
    for name, stat in STATS.items():
        values = {id(r): stat(r["support"]["logprobs"]) for r in let if r["support"]["logprobs"]}
        for t in sorted(set(values.values())) + [0.01]:
            back = [r for r in let if values.get(id(r), 0.0) < t]
            lost = sum(r["right"] for r in back if r["type"] != "Null")
            caught = sum(score(HELD, r["gold"], r["type"]).right for r in back)
            right = base_right - sum(r["right"] for r in back) + caught
            errors = sum(r["error"] for r in items) - sum(r["error"] for r in back)
            row = (name, t, len(back), lost, caught, right, errors)
            rows.append(row)
            if lost <= bound:
                key = (right, -len(back))
                if best is None or key > best[0]:
                    best = (key, row)
    print("statistic  t  held_back  right_lost  null_caught  right  errors")
    for name, t, back, lost, caught, right, errors in rows:
        if back <= 40:
            print(f"{name:7} {t:9.4f} {back:4} {lost:4} {caught:4} {right:4} {errors:4}")
    assert best is not None
    name, t, back, lost, caught, right, errors = best[1]
    print(f"\nchosen: {name} < {t:.4f}: holds back {back} (right lost {lost}, Null caught "
          f"{caught}); right {right} against {base_right}; errors "
          f"{sum(r['error'] for r in items)} -> {errors}")
    print("kept by the rule" if right >= base_right + 2 else "not kept: fewer than 2 more right")


if __name__ == "__main__":
    main(sys.argv[1])
