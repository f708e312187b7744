"""The files check of the one stored tune reply that writes '20260901_13:00', recomputed
with the check's day pattern as it is now and as it was when the run ran (the passages
read again by the product's own search and cut from the run's index).

    python3 recheck.py DIR/index.db > recheck.txt   (from the project root, after the run)
"""

import json, re, sys
from assistant.base import config
from assistant.core import localfiles
from assistant.core.session import Session
from assistant.drag import filescut, filessupport

item = next(
    json.loads(l)
    for l in open("docs/results/local-docs-dayfirst-tune/local-docs-items.jsonl")
    if "20260901_13:00" in json.loads(l)["reply"]
)
settings = config.load({"store.database": sys.argv[1], "files.k": 5, "files.learn_names": False})
with Session(settings) as rt:
    ps = localfiles.search(rt, item["question"], k=5, method="minirag")
    weight = rt.files_index().weight
    cuts = filescut.cut(
        item["question"], [p.text for p in ps], weight, rt.student.count_tokens, 500
    )
    read = [(c.text, ps[c.index].time) for c in cuts]
    print("stored:", item["support"])
    new = filessupport.check(
        item["question"], item["reply"], read, weight, item["support"]["logprobs"]
    )
    print("now:   ", new.to_dict(), "not_in_files", new.not_in_files)
    filessupport._DAYS = re.compile(
        r"(?i)\b\d{4}-\d\d-\d\d\b|\b\d{8}\b|\b\d{1,2}(?:st|nd|rd|th)?\b|\b\d{4}\b"
        r"|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\b"
    )
    old = filessupport.check(
        item["question"], item["reply"], read, weight, item["support"]["logprobs"]
    )
    print("old:   ", old.to_dict(), "not_in_files", old.not_in_files)
