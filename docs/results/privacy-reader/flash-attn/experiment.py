"""The privacy reader (reader-v4.1, the 0.5B) with llama.cpp's flash attention off and
on, side by side in one run: each text read by both, taking turns at going first, each
model holding the reader's head read in this process.  The texts: MMLU controls 0-59 (the
dev controls) and the first 40 queries of PUPA-TNB's seen half (the rules' split).  Writes
each text's id, whether the two readings agree (the values found, and whether the reading
was whole) and the seconds of each, never the texts or values; prints the summary.

    PYTHONPATH=bench python experiment.py OUT_DIR
"""

import json
import statistics
import sys
import time
from pathlib import Path

from assistant.base import config
from assistant.models import modelfiles
from assistant.models.student import Student
from assistant.privacy.detector import Detector
from assistant.privacy.reader import HEAD_MARK, SpanReader, head
from drag_bench.privacy.datasets import load_dataset, split_items

out_dir = Path(sys.argv[1])
out_dir.mkdir(parents=True, exist_ok=True)
s = config.load()
path, _ = modelfiles.resolve(s.privacy.reader_model or s.student.model)
detector = Detector()
readers = {}
for flash in (False, True):
    model = Student(path, n_ctx=2048, lookup=True, flash_attn=flash)
    readers[flash] = (
        model,
        SpanReader(model, common=detector.common, timeout=s.privacy.reader_timeout),
    )
controls = [i for i in load_dataset("bundled") if i.control][:60]
pupa = [i for i in split_items(load_dataset("pupa"), "seen") if not i.control][:40]
rows = []
for n, item in enumerate(controls + pupa):
    got = {}
    for flash in (False, True) if n % 2 == 0 else (True, False):
        model, reader = readers[flash]
        model.keep_head(head(), HEAD_MARK, None)
        started = time.perf_counter()
        try:
            reading = reader.read(item.text)
            what = (sorted((f.entity, f.start, f.end) for f in reading.findings), reading.complete)
        except Exception as exc:  # a refusal: compared by its kind
            what = (type(exc).__name__, None)
        got[flash] = (what, time.perf_counter() - started)
    rows.append(
        {
            "id": item.id,
            "set": "controls 0-59" if n < len(controls) else "pupa seen, first 40",
            "same": got[False][0] == got[True][0],
            "seconds_off": round(got[False][1], 3),
            "seconds_on": round(got[True][1], 3),
        }
    )
(out_dir / "readings.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
lines = []
for part in ("controls 0-59", "pupa seen, first 40"):
    r = [x for x in rows if x["set"] == part]
    off = [x["seconds_off"] for x in r]
    on = [x["seconds_on"] for x in r]
    lines.append(
        f"{part}: {len(r)} texts, the same reading {sum(x['same'] for x in r)}; "
        f"p50 {statistics.median(off):.2f} s off, {statistics.median(on):.2f} s on; "
        f"in all {sum(off):.1f} s off, {sum(on):.1f} s on ({sum(on) / sum(off):.3f})"
    )
(out_dir / "summary.txt").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
