"""A new `drag ask --files` process, its answer's fixed head kept on disk or not
(issue 51): side by side, question by question, taking turns at going first.

    python3 coldstart.py --db INDEX.db --questions lihua_dev.csv --n 8 > coldstart.txt

For each question, two new processes answer it: one after the files head's state file was
removed from the cache folder ("read": the process reads the head and keeps it), one with
it there ("loaded").  Each prints its record (`drag ask --files --json`); this reports
the wall time of each process, the product's own timings (head, answer) and the student's
prompt seconds, and the medians.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path


def median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[math.ceil(len(ordered) / 2) - 1]


def cache_folder() -> Path:
    out = subprocess.run(
        [sys.executable, "-c", "from assistant.base import paths; print(paths.cache_dir())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip()) / "prefix-state"


def ask(question: str, env: dict[str, str]) -> dict:
    started = time.perf_counter()
    done = subprocess.run(
        ["drag", "ask", "--files", "--json", question], capture_output=True, text=True, env=env
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"drag ask failed: {done.stderr.strip()}")
    record = json.loads(done.stdout)
    return {
        "wall": round(wall, 3),
        "head": record["student"]["head"],
        "head_s": record["timings"]["head"],
        "answer_s": record["timings"]["answer"],
        "prompt_s": record["student"]["prompt_seconds"],
        "prompt_tokens": record["student"]["prompt_tokens"],
        "reply": record["answer"],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--questions", required=True)
    parser.add_argument("--n", type=int, default=8)
    args = parser.parse_args()
    with open(args.questions, encoding="utf-8", newline="") as handle:
        questions = [r["Question"] for r in csv.DictReader(handle)][: args.n]
    env = {**os.environ, "DRAG_STORE_DATABASE": args.db, "ORT_DISABLE_TELEMETRY": "1"}
    folder = cache_folder()
    rows: dict[str, list[dict]] = {"read": [], "loaded": []}
    for number, question in enumerate(questions):
        order = ["read", "loaded"] if number % 2 == 0 else ["loaded", "read"]
        for way in order:
            if way == "read":
                for state in folder.glob("*-files-*.state"):
                    state.unlink()
            else:  # a state file there: made by a process that read the head
                if not list(folder.glob("*-files-*.state")):
                    ask(question, env)
            got = ask(question, env)
            rows[way].append(got)
            print(json.dumps({"n": number, "way": way, **got}, ensure_ascii=False), flush=True)
    for way, got in rows.items():
        print(
            f"{way}: {len(got)} processes; head {sorted({g['head'] for g in got})}; "
            f"wall p50 {median([g['wall'] for g in got]):.2f} s; "
            f"head + answer p50 {median([g['head_s'] + g['answer_s'] for g in got]):.2f} s; "
            f"student prompt p50 {median([g['prompt_s'] for g in got]):.2f} s"
        )
    same = sum(a["reply"] == b["reply"] for a, b in zip(rows["read"], rows["loaded"]))
    print(f"same reply in {same} of {len(questions)}")


if __name__ == "__main__":
    main()
