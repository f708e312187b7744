"""The stored day-first replies judged again by the answer check as it is now, beside
the check as the runs ran it (see command.txt).

    PYTHONPATH=bench python3 docs/results/local-docs-days-check/rejudge.py INDEX.db
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from drag_bench.localdocs.scoring import score

from assistant.base import config
from assistant.core import localfiles
from assistant.core.session import Session
from assistant.drag import filescut, filessupport

RESULTS = Path(__file__).resolve().parent.parent
HALVES = {"tune": "local-docs-dayfirst-tune", "report": "local-docs-dayfirst-report"}
HELD = "Your files do not say."
# The check's day words before (filessupport at 20cb496), to recompute the stored check.
OLD_DAYS = re.compile(
    r"(?i)\b\d{4}-\d\d-\d\d\b|(?<!\w)\d{8}(?:_\d{1,2}:\d\d)?(?!\w)"
    r"|\b\d{1,2}(?:st|nd|rd|th)?\b|\b\d{4}\b"
    r"|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\b"
)


def old_without_days(text: str) -> str:
    named = filessupport.dates_in(text, compact=True)
    return OLD_DAYS.sub(" ", text) if named else text


def main(database: str) -> None:
    settings = config.load({"store.database": database, "files.k": 5, "files.learn_names": False})
    now = filessupport._without_days
    with Session(settings) as rt:
        weight = rt.files_index().weight
        for half, folder in HALVES.items():
            items = [json.loads(x) for x in (RESULTS / folder / "local-docs-items.jsonl").open()]
            tally = {"old": [0, 0], "new": [0, 0]}
            changed = []
            for r in items:
                ps = localfiles.search(rt, r["question"], k=5, method="minirag")
                cuts = filescut.cut(
                    r["question"], [p.text for p in ps], weight, rt.student.count_tokens, 500
                )
                read = [(c.text, ps[c.index].time) for c in cuts]
                # The passages read, as the run read them (its sources: the cut ones).
                assert [t for _, t in read] == [s["time"] for s in r["sources"]], r["question"]
                # The student's answer: kept under "unsupported" where the check held it.
                said = r["support"]["unsupported"] if "unsupported" in r["support"] else r["reply"]
                lp = r["support"]["logprobs"]
                held = {}
                for way, strip in (("old", old_without_days), ("new", now)):
                    filessupport._without_days = strip
                    verdict = filessupport.check(r["question"], said, read, weight, lp)
                    held[way] = verdict.not_in_files  # as the record's held_back reads it
                filessupport._without_days = now
                assert held["old"] == r["held_back"], ("the stored check differs", r["question"])
                for way in ("old", "new"):
                    v = score(HELD if held[way] else said, r["gold"], r["type"])
                    tally[way][0] += v.right
                    tally[way][1] += v.error
                if held["old"] != held["new"]:
                    changed.append((r["question"], said, held["new"]))
            print(f"## {half}: {len(items)} stored replies")
            for way in ("old", "new"):
                print(f"check {way}: right {tally[way][0]}, errors {tally[way][1]}")
            print(f"replies the mend judges otherwise: {len(changed)}")
            for question, said, now_held in changed:
                print(
                    f"  {'held back' if now_held else 'let through'} now: {question!r} -> {said!r}"
                )
            print()


if __name__ == "__main__":
    main(sys.argv[1])
