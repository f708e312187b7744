"""The blind files the graders read: each stored reply with its question, gold answer and
type, and nothing of the scorer's (no verdict, no passages, no sources).

    python3 blind.py      (from this folder; writes the *-blind.jsonl files)
"""

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent
# name: (the stored items, which of them)
SETS = {
    "dayfirst-tune": ("local-docs-dayfirst-tune/local-docs-items.jsonl", None),
    "dayfirst-report": ("local-docs-dayfirst-report/local-docs-items.jsonl", None),
    "vector500-report": ("local-docs-report-read/local-docs-items.jsonl", ("vector", 500)),
    "extractive-tune": ("local-docs-prompt-tune/extractive/local-docs-items.jsonl", None),
}
FIELDS = ("question", "gold", "type", "reply")


def items(name: str) -> list[dict]:
    path, which = SETS[name]
    rows = [json.loads(line) for line in (RESULTS / path).open(encoding="utf-8")]
    if which:
        rows = [r for r in rows if (r["method"], r["read_tokens"]) == which]
    return rows


def blind(name: str) -> list[dict]:
    return [{"n": n, **{k: r[k] for k in FIELDS}} for n, r in enumerate(items(name))]


if __name__ == "__main__":
    for name in SETS:
        with (HERE / f"{name}-blind.jsonl").open("w", encoding="utf-8") as out:
            for row in blind(name):
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
