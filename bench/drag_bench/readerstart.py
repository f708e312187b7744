"""Reader start-up benchmark: the privacy reader's first reading in a new process, with
its prompt's head loaded from disk, read afresh, or not held at all (issue 48).

Each run is a new Python process that loads the reader's model and reads one made-up
question; the three ways take turns, run by run, so that they share the machine's load:

* ``disk``: the head's llama.cpp state loaded from a state file made before the runs
  (what ``drag`` does from its second process on);
* ``read``: the head read in the process before the question (what the first process
  does, and what a missing or damaged file costs);
* ``none``: nothing held: the question's prompt is read whole (the reader before the
  state was kept).

    drag bench reader-start [--runs 5] [--model qwen2.5-coder-0.5b-instruct]

It prints the median seconds of the model's load, of holding the head and of the first
reading, and the ratio of each way's time to a first reading to ``none``'s.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from drag_bench import arguments

QUESTION = (
    "hey its dana from brightloop, can you help me write to my manager tomas about the "
    "q3 launch? we are based in pune and the client is korvala oy"
)

CHILD = """
import json, sys, time
from pathlib import Path
started = time.perf_counter()
from assistant.models import modelfiles
from assistant.models.student import Student
from assistant.privacy import reader as R
path, _spec = modelfiles.resolve(sys.argv[1])
model = Student(path, n_ctx=2048)
loaded = time.perf_counter()
way, folder = sys.argv[2], Path(sys.argv[3])
held = "none"
if way != "none":
    held = model.keep_head(R.head(), R.HEAD_MARK, folder if way == "disk" else None)
ready = time.perf_counter()
reading = R.SpanReader(model, common=lambda _w: False).read(sys.argv[4])
done = time.perf_counter()
model.close()
print(json.dumps({"held": held, "load": loaded - started, "head": ready - loaded,
                  "read": done - ready, "found": len(reading.findings)}))
"""

WAYS = ("disk", "read", "none")


def child(model: str, way: str, folder: Path) -> dict[str, float | str]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, model, way, str(folder), QUESTION],
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    parser = arguments("reader-start", __doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "prefix-state"
        try:
            first = child(args.model, "disk", folder)  # makes the state file
        except subprocess.CalledProcessError as exc:
            print(f"bench reader-start: error: {exc.stderr.strip()[-300:]}", file=sys.stderr)
            return 1
        if first["held"] != "saved":
            print(f"bench reader-start: error: the head was {first['held']}", file=sys.stderr)
            return 1
        runs: dict[str, list[dict[str, float | str]]] = {w: [] for w in WAYS}
        for _ in range(args.runs):
            for way in WAYS:
                runs[way].append(child(args.model, way, folder))
    base = statistics.median(float(r["head"]) + float(r["read"]) for r in runs["none"])
    print(f"## Reader start-up · {args.model} · {args.runs} runs each, taking turns\n")
    print("| way | held | load s | head s | first reading s | head + reading s | vs none |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for way, rows in runs.items():
        med = {k: statistics.median(float(r[k]) for r in rows) for k in ("load", "head", "read")}
        total = statistics.median(float(r["head"]) + float(r["read"]) for r in rows)
        held = ",".join(sorted({str(r["held"]) for r in rows}))
        print(
            f"| {way} | {held} | {med['load']:.2f} | {med['head']:.2f} | {med['read']:.2f} "
            f"| {total:.2f} | {total / base:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
