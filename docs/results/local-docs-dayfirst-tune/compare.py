"""The day first against the baseline, on the tune half (see command.txt).

python3 compare.py DIR/local-docs-items.jsonl [BASE]   (bench/ on PYTHONPATH; run from here)

The baseline is ../local-docs-sureness-tune's stored run, its replies scored by today's
bench scorer, with the kept sureness rule (an answer's lowest token log-probability
below -2.0 is held back) applied as the product now does.  With BASE, that run's items
are the baseline instead (the names run compares with the day-first run so).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from drag_bench.localdocs import rescore
from drag_bench.localdocs.scoring import score

HERE = Path(__file__).resolve().parent
BASE = HERE.parent / "local-docs-sureness-tune" / "local-docs-items.jsonl"
HELD = "Your files do not say."
SURE_AT_LEAST = -2.0  # written out here: the scorer side does not import the product


def load(path: Path) -> dict[str, dict]:
    return {r["question"]: rescore(r) for r in map(json.loads, path.open(encoding="utf-8"))}


def with_kept_rule(item: dict) -> dict:
    probs = (item.get("support") or {}).get("logprobs") or []
    if item["held_back"] or not probs or min(probs) >= SURE_AT_LEAST:
        return item
    verdict = score(HELD, item["gold"], item["type"])
    return {
        **item,
        "reply": HELD,
        "held_back": True,
        "right": verdict.right,
        "error": verdict.error,
        "abstained": verdict.abstained,
    }


def figures(items: list[dict]) -> str:
    answerable = [i for i in items if i["type"] != "Null"]
    return (
        f"right {sum(i['right'] for i in items)} of {len(items)}, "
        f"errors {sum(i['error'] for i in items)}, "
        f"Null right {sum(i['right'] for i in items if i['type'] == 'Null')} of "
        f"{len(items) - len(answerable)}, "
        f"answerable held back {sum(i['held_back'] for i in answerable)} of {len(answerable)}, "
        f"evidence {sum(i['evidence_found'] for i in items)} of "
        f"{sum(i['evidence_wanted'] for i in items)}"
    )


def main(path: str, against: str = "") -> None:
    new = load(Path(path))
    base = {
        q: with_kept_rule(i)
        for q, i in load(Path(against) if against else BASE).items()
        if q in new
    }
    assert set(base) == set(new), "the two runs asked other questions"
    print("baseline:", figures(list(base.values())))
    print("this run:", figures(list(new.values())))
    same_sources = [
        q
        for q in new
        if [s["time"] for s in new[q]["sources"]] == [s["time"] for s in base[q]["sources"]]
    ]
    differ = [q for q in same_sources if new[q]["reply"] != base[q]["reply"]]
    print(f"passages unchanged: {len(same_sources)}; of them another reply: {len(differ)}")
    for q in differ:
        print("  another reply, same passages:", q)
    print("\npassages changed:")
    for q in new:
        if q in same_sources:
            continue
        b, n = base[q], new[q]
        print(
            f"  evidence {b['evidence_found']}->{n['evidence_found']}/{n['evidence_wanted']} "
            f"right {b['right']}->{n['right']} error {b['error']}->{n['error']}: {q}"
        )


if __name__ == "__main__":
    main(*sys.argv[1:3])
