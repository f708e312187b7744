"""The threshold of ln P(no) chosen on the tune half: the one that leaves the most replies
right (an answerable question held back is wrong; an unanswerable one held back is right).
Ties go to the higher threshold (fewer answers held back).
Reads tune.jsonl (written by probe.py)."""

import json
import math
import sys
from pathlib import Path

rows = [json.loads(line) for line in Path(sys.argv[1]).open()]
null = [r for r in rows if r["type"] == "Null"]
rest = [r for r in rows if r["type"] != "Null"]
print(
    f"{len(rows)} tune questions: {len(null)} unanswerable, {len(rest)} answerable, "
    f"{sum(r['right'] for r in rest)} of them answered right without the judge"
)


def auc(key, sign):
    """How often an unanswerable question reads higher than an answerable one (ties half)."""
    pos = [sign * r[key] for r in null]
    neg = [sign * r[key] for r in rest]
    return sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / len(pos) / len(neg)


print("separating unanswerable from answerable questions (AUC):")
for key, sign, what in [
    ("judge_no", 1, "the judge's ln P(no)"),
    ("lp_your", 1, 'ln P("Your") as the reply\'s first token'),
    ("mean8", -1, "the reply's first 8 tokens, mean ln P (lower: unsure)"),
    ("mean_all", -1, "the whole reply, mean ln P (lower: unsure)"),
]:
    print(f"  {auc(key, sign):.3f}  {what}")


def outcome(t):
    held = [r for r in rows if r["judge_no"] >= t]
    caught = sum(r["type"] == "Null" for r in held)
    held_rest = [r for r in held if r["type"] != "Null"]
    lost = sum(r["right"] for r in held_rest)
    right = sum(r["right"] for r in rest) - lost + caught
    return right, caught, len(held_rest), lost


# Thresholds between two neighbouring readings all give the same outcome: one per gap,
# its midpoint (so that no tune reading sits on the boundary).
readings = sorted({r["judge_no"] for r in rows})
cands = [round((a + b) / 2, 3) for a, b in zip(readings, readings[1:])]
best = max(cands, key=lambda t: (outcome(t)[0], t))
print("ln P(no) >= t | P(no) | right | unanswerable caught | answerable held | right ones lost")
for t in cands:
    if -2.0 <= t <= -0.5:
        r, c, h, l = outcome(t)
        mark = "  <- chosen" if t == best else ""
        print(f"{t:7.3f} | {math.exp(t):.3f} | {r} | {c}/{len(null)} | {h}/{len(rest)} | {l}{mark}")
print(
    f"chosen: ln P(no) >= {best} (P(no) >= {math.exp(best):.3f}); right: {outcome(best)[0]} "
    f"of {len(rows)} (without the judge: {sum(r['right'] for r in rest)})"
)
