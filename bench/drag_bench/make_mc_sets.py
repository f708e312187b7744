"""Regenerate the bundled MMLU and MedMCQA subsets and the ARC-Challenge and MMLU dev
splits from the verbatim copies in ``../shared/data`` (seeded: the same files every
time).

    python -m drag_bench.make_mc_sets --shared ../shared/data

Both are written in the bundled ARC format (one JSON object per line:
``{id, question, options: [{label, text}], answer, subject}``).  See
``bench/drag_bench/data/PROVENANCE.md`` for origins and licences.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import re
import sys
from pathlib import Path
from typing import Any

DATA = Path(__file__).with_name("data")
SEED = 2506  # the DRAG paper's arXiv number, 2506.01954
MMLU_PER_SUBJECT = 6
MEDMCQA_ITEMS = 300
ARC_TEST = 200  # arc_challenge_first200.jsonl: the reported split
ARC_DEV = 200
LABELS = "ABCD"


def _item(
    item_id: str, question: str, options: list[str], answer: int, subject: str
) -> dict[str, Any]:
    return {
        "id": item_id,
        "question": question.strip(),
        "options": [{"label": LABELS[i], "text": str(t).strip()} for i, t in enumerate(options)],
        "answer": LABELS[answer],
        "subject": subject,
    }


def mmlu(shared: Path, split: str = "test", per_subject: int | None = MMLU_PER_SUBJECT) -> Any:
    """A seeded sample of ``per_subject`` items of each subject's ``split`` (all of them
    for None)."""
    out = []
    for path in sorted((shared / "mmlu" / split).glob(f"*_{split}.csv")):
        subject = path.name.removesuffix(f"_{split}.csv")
        with path.open(encoding="utf-8", newline="") as fh:
            rows = list(csv.DictReader(fh))
        chosen = (
            range(len(rows))
            if per_subject is None
            else sorted(random.Random(f"{SEED}-{subject}").sample(range(len(rows)), per_subject))
        )
        prefix = "mmlu" if split == "test" else f"mmlu-{split}"
        for i in chosen:
            r = rows[i]
            options = [r[f"choice{j}"] for j in range(4)]
            out.append(
                _item(f"{prefix}-{subject}-{i}", r["question"], options, int(r["answer"]), subject)
            )
    return out


_PREFIX = re.compile(r"^([A-D])[.)]\s*(?:\1[.)]\s*)?")  # some items say "A. A. text"


def medmcqa(shared: Path) -> list[dict[str, Any]]:
    lines = (shared / "medmcqa" / "validation.jsonl").read_text("utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    chosen = sorted(random.Random(SEED).sample(range(len(rows)), MEDMCQA_ITEMS))
    out = []
    for i in chosen:
        r = rows[i]
        options = [_PREFIX.sub("", c) for c in r["choices"]]
        out.append(_item(f"medmcqa-val-{i}", r["question"], options, int(r["answer"]), "medicine"))
    return out


def arc_dev(shared: Path) -> list[dict[str, Any]]:
    """ARC-Challenge test items 201-400, unchanged: the development split on which the
    student-side choices are tried (the reported table uses the first 200)."""
    lines = (shared / "arc" / "arc_challenge_test.jsonl").read_text("utf-8").splitlines()
    return [json.loads(line) for line in lines[ARC_TEST : ARC_TEST + ARC_DEV]]


def write(path: Path, items: list[dict[str, Any]]) -> None:
    text = "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items)
    path.write_text(text, "utf-8")
    print(f"{path}: {len(items)} items", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shared", type=Path, default=Path("../shared/data"))
    parser.add_argument("--out", type=Path, default=DATA)
    args = parser.parse_args(argv)
    write(args.out / "mmlu_sample.jsonl", mmlu(args.shared))
    write(args.out / "medmcqa_sample.jsonl", medmcqa(args.shared))
    write(args.out / "arc_challenge_dev200.jsonl", arc_dev(args.shared))
    # MMLU's own dev split (its 5 few-shot items per subject, never in its test split):
    # where the confidence gate's rule is tried for MMLU, never reported.
    write(args.out / "mmlu_dev285.jsonl", mmlu(args.shared, "dev", None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
