"""Issue 51, the TUNE half, the second rule (command.txt): hold back an answer the word
check lets through when the MEAN of its tokens' log-probabilities is below t, alone or
with the kept rule (its lowest below -2.0); the fewest errors among those that hold back
at most 2 of the answerable questions' right replies.

    python3 choose2.py DIR/local-docs-items.jsonl > choose2.txt   # bench/ on PYTHONPATH

Scored by the benchmark's scorer (drag_bench.localdocs.scoring)."""

from __future__ import annotations

import json
import statistics
import sys

from drag_bench.localdocs.scoring import abstains, score

HELD = "Your files do not say."
LOWEST_AT = -2.0


def main(path: str) -> None:
    items = [json.loads(line) for line in open(path, encoding="utf-8")]
    base_right = sum(r["right"] for r in items)
    base_errors = sum(r["error"] for r in items)
    right_answerable = sum(r["right"] for r in items if r["type"] != "Null")
    bound = int(0.05 * right_answerable)
    let = [r for r in items if not r["held_back"] and not abstains(r["reply"])]
    mean = {id(r): statistics.fmean(r["support"]["logprobs"]) for r in let}
    low = {id(r): min(r["support"]["logprobs"]) for r in let}
    kept = [r for r in let if low[id(r)] < LOWEST_AT]
    kept_errors = base_errors - sum(r["error"] for r in kept)
    print(f"{len(items)} items; the word check alone: right {base_right}, errors {base_errors};"
          f" with the kept rule (lowest < {LOWEST_AT}): errors {kept_errors}; at most {bound}"
          " answerable right replies may be held back")
    print("with_kept  t  held_back  right_lost  null_caught  right  errors")
    best = None
    for with_kept in (False, True):
        for t in sorted(set(mean.values())) + [0.01]:
            back = [r for r in let if mean[id(r)] < t or (with_kept and low[id(r)] < LOWEST_AT)]
            lost = sum(r["right"] for r in back if r["type"] != "Null")
            caught = sum(score(HELD, r["gold"], r["type"]).right for r in back)
            right = base_right - sum(r["right"] for r in back) + caught
            errors = base_errors - sum(r["error"] for r in back)
            if lost <= bound:
                print(f"{with_kept!s:5} {t:9.4f} {len(back):4} {lost:4} {caught:4} {right:4} "
                      f"{errors:4}")
                key = (-errors, -len(back))
                if best is None or key > best[0]:
                    best = (key, with_kept, t, len(back), lost, caught, right, errors)
    assert best is not None
    _, with_kept, t, back, lost, caught, right, errors = best
    below = max((v for v in mean.values() if v < t), default=None)
    print(f"\nchosen: mean < {t:.4f}{' or lowest < -2.0' if with_kept else ''} (the same "
          f"answers for t in ({below:.4f}, {t:.4f}]): holds back {back} (right lost {lost}, "
          f"Null caught {caught}); right {right}; errors {errors} against {kept_errors} now")
    print("kept by the rule" if errors <= kept_errors - 5 else "not kept: fewer than 5 fewer errors")


if __name__ == "__main__":
    main(sys.argv[1])
