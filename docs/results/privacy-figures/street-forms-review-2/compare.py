"""The street patterns before and after the review's forms of 2026-12-07, run over the
same texts: every match that differs is printed (compare.txt holds this run's output).

Run from the project root: .venv/bin/python docs/results/privacy-figures/street-forms-review-2/compare.py
``recognizers-before.json``: the policy's recognizers at 2dbfe7f, written out
(``list(load_policy().recognizers)``; the Finnish pattern's name as it is now, so that
the two versions pair up).  The test strings are tests/test_addresses.py at 2dbfe7f."""

import csv
import glob
import json
import re
import subprocess
from pathlib import Path

import regex

from assistant.privacy.policy import load_policy

HERE = Path(__file__).parent
SHARED = "../shared/data/"
FLAGS = regex.IGNORECASE | regex.MULTILINE | regex.DOTALL

before = {
    (r["name"], p["name"]): p["regex"]
    for r in json.loads((HERE / "recognizers-before.json").read_text("utf-8"))
    for p in r.get("patterns", [])
}
pairs = []
for r in load_policy().recognizers:
    for p in r.get("patterns", []):
        old = before.get((r["name"], p["name"]), "(?!)")  # a new pattern: nothing before
        if old != p["regex"]:
            pairs.append((p["name"][:50], regex.compile(old, FLAGS), regex.compile(p["regex"], FLAGS)))
print("changed or new patterns:", len(pairs))

texts: list[str] = []
csv.field_size_limit(10**9)
with open(SHARED + "pupa/PUPA_TNB.csv", encoding="utf-8") as f:
    for row in csv.DictReader(f):
        texts.extend(v for v in row.values() if v)
texts += [t["full_text"] for t in json.load(open(SHARED + "presidio_research/synth_dataset_v2.json"))]
for name in ("arc/arc_challenge_test.jsonl", "medmcqa/validation.jsonl"):
    texts.extend(open(SHARED + name, encoding="utf-8"))
for path in sorted(glob.glob(SHARED + "mmlu/*/*.csv")):
    texts.extend(open(path, encoding="utf-8"))
for path in sorted(glob.glob(SHARED + "lihuaworld/**/*", recursive=True)):
    try:
        texts.append(open(path, encoding="utf-8").read())
    except (OSError, UnicodeDecodeError):
        pass
tests = subprocess.run(
    ["git", "show", "2dbfe7f:tests/test_addresses.py"], capture_output=True, text=True, check=True
).stdout
texts += re.findall(r'"((?:[^"\\\n]|\\.)*)"', tests) + re.findall(r"'((?:[^'\\\n]|\\.)*)'", tests)
print("texts:", len(texts))

differ = 0
for name, old_p, new_p in pairs:
    for t in texts:
        a = [m.group() for m in old_p.finditer(t)]
        b = [m.group() for m in new_p.finditer(t)]
        if a != b:
            differ += 1
            print("DIFF", name, repr(t[:120]), a, b)
print("texts whose matches differ:", differ)
