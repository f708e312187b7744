"""Prototype: the reader reads the question with the detector's findings already replaced
(<PERSON_1>...), values mapped back to the original; vs the reader on the raw question.
Same Session, alternating order; PUPA seen half, first N PII queries. Measures the reading's
seconds and units sent verbatim after sanitize (case-folded substring of the sent text)."""
import sys, time, json, statistics, re
from assistant.base import config
from assistant.core.session import Session
from assistant.base.errors import PrivacyError
from assistant.privacy import reader as R
from assistant.privacy.findings import Finding
from assistant.privacy.reader import Reading, chunks, shaped, entity_of, _TERMS, _ACRONYM
from drag_bench.privacy.datasets import load_dataset, split_items

N = int(sys.argv[1]); SPLIT = sys.argv[2]
items = [i for i in split_items(load_dataset("pupa"), SPLIT) if not i.control][:N]

def masked_of(text, findings):
    out, back, last, n = [], {}, 0, {}
    for f in sorted(findings, key=lambda f: f.start):
        if f.start < last: continue
        tag = f.entity.split("_")[0][:6]
        n[tag] = n.get(tag, 0) + 1
        ph = f"<{tag}_{n[tag]}>"
        back[ph] = text[f.start:f.end]
        out.append(text[last:f.start]); out.append(ph); last = f.end
    out.append(text[last:])
    return "".join(out), back

def read_masked(reader, text, findings):
    started = time.perf_counter()
    mtext, back = masked_of(text, findings)
    unmask = lambda v: re.sub(r"<[A-Z]+_\d+>", lambda m: back.get(m.group(), m.group()), v)
    deadline = started + reader.allowed(mtext)
    out, listed, dropped, complete = [], 0, 0, True
    for _o, piece in chunks(mtext):
        pairs, whole = reader._read_piece(piece, deadline, lambda v: reader._kind(text, unmask(v)))
        complete = complete and whole
        for cat, value in pairs:
            listed += 1
            value = unmask(value)
            spots = reader._spots(text, value)
            if spots and cat in _TERMS and _ACRONYM.match(text[spots[0][0]:spots[0][1]]): spots = []
            ent = shaped(entity_of(cat, value), value)
            if not spots or ent is None: dropped += 1; continue
            out += [Finding(ent, s, e, text[s:e], 0.9, R.RECOGNIZER) for s, e in spots]
    return Reading(out, time.perf_counter() - started, listed, dropped, complete), len(mtext)

rows = []
with Session(config.load({"privacy.reader": "on", "store.offline": False})) as rt:
    reader = rt.reader
    reader.read("warm up: Hello, my name is Anna.")
    for k, it in enumerate(items):
        row = {"id": it.id, "chars": len(it.text)}
        dets = rt.detector.find(it.text)
        order = ("raw", "masked") if k % 2 == 0 else ("masked", "raw")
        for way in order:
            t = time.perf_counter()
            try:
                if way == "raw":
                    rd = reader.read(it.text); row["mchars"] = None
                else:
                    rd, row["mchars"] = read_masked(reader, it.text, dets)
                secs = time.perf_counter() - t
                s = rt.sanitize(it.text, rd, rewrite=False)
                sent = s.text.casefold()
                leaked = [u for _t, u in it.pii if u.casefold() in sent]
                row[way] = {"s": secs, "complete": rd.complete, "listed": rd.listed, "leaked": len(leaked), "units": len(it.pii), "kept_words": None}
            except PrivacyError as e:
                row[way] = {"s": time.perf_counter() - t, "refused": True, "units": len(it.pii), "leaked": 0}
        rows.append(row)
        print(k, row["chars"], row["mchars"], *(f'{w} {row[w]["s"]:.2f}s leak {row[w]["leaked"]}/{row[w]["units"]} {"REF" if row[w].get("refused") else ""}{"" if row[w].get("complete", True) else "INCOMPLETE"}' for w in ("raw", "masked")), flush=True)
json.dump(rows, open(f"/work/proto/masked-{SPLIT}-{N}.json", "w"))
for w in ("raw", "masked"):
    ss = [r[w]["s"] for r in rows]
    print(w, "p50", round(statistics.median(ss), 2), "p90", round(sorted(ss)[int(len(ss)*0.9)], 2), "sum", round(sum(ss), 1),
          "leaked", sum(r[w]["leaked"] for r in rows), "of", sum(r[w]["units"] for r in rows),
          "refused", sum(bool(r[w].get("refused")) for r in rows), "incomplete", sum(not r[w].get("complete", True) for r in rows))
