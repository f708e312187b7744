"""Dev (seen half, work-context items): the 0.5B's readings alone vs joined with the
1.5B's (issue 48, item 2: a second opinion), detector included; cached readings.

    PYTHONPATH=bench python union.py SMALL.jsonl BIG.jsonl ids.txt > union.txt

SMALL.jsonl / BIG.jsonl: --reader-cache files of the two runs (README.md)."""
import json, sys, pathlib
from drag_bench.privacy.datasets import load_dataset, split_items
from drag_bench.privacy.methods import make_full, cached_reads
from drag_bench.privacy.report import score, summarise
from assistant.privacy.detector import Detector
from assistant.privacy.reader import Reading
ids = set(open(sys.argv[3]).read().split(","))
items = [i for i in split_items(load_dataset("pupa"), "seen") if i.id in ids]
def miss(q): raise KeyError(q)
small = cached_reads(miss, pathlib.Path(sys.argv[1]), "qwen2.5-coder-0.5b-instruct reader-v2 grammar fallback")
big = cached_reads(miss, pathlib.Path(sys.argv[2]), "qwen2.5-coder-1.5b-instruct reader-v3 grammar fallback")
def both(q):
    a, b = small(q), big(q)
    return Reading(a.findings + b.findings, a.seconds + b.seconds, a.listed + b.listed, a.dropped + b.dropped, a.complete and b.complete)
det = Detector()
for name, read in (("0.5B", small), ("1.5B", big), ("0.5B+1.5B", both)):
    run = make_full(det, None, None, read)
    recs = [score(i, run(i)) for i in items]
    s = summarise(recs)
    secs = sorted(r.seconds for r in map(read, (i.text for i in items)))
    print(f"{name}: items {s['items']} units {s['units']} leak {s['unit_leak_rate']:.2%} whole {s['unit_whole_rate']:.2%} refused {s['blocked']} kept {s['kept_words']:.1%} PERSON {s['by_category'].get('PERSON')} read p50 {secs[len(secs)//2]:.1f}s total {sum(secs):.0f}s")
