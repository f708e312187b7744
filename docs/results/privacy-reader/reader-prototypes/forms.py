"""Prototype: JSON reply vs one line per value, same 0.5B, seen half, first N PII queries, single free call each, alternating."""
import sys, time, json, statistics, re
from assistant.models import modelfiles
from assistant.models.student import Student
from assistant.privacy import reader as R
from drag_bench.privacy.datasets import load_dataset, split_items

N = int(sys.argv[1]); SPLIT = sys.argv[2] if len(sys.argv) > 2 else "seen"
items = [i for i in split_items(load_dataset("pupa"), SPLIT) if not i.control and len(i.text) < 1500][:N]
path, _ = modelfiles.resolve("qwen2.5-coder-0.5b-instruct", lambda s: None)

LSYSTEM = R.SYSTEM.replace(
    'Reply with JSON: {"found": [[category, value], ...]}, or {"found": []} when there is none.',
    'Reply with one line for each value, its category, a colon and the value: "person: Anna". '
    'Reply with the one word none when there is none.')
assert LSYSTEM != R.SYSTEM
def lmessages(text):
    out = [{"role": "system", "content": LSYSTEM}]
    for ex, found in R.EXAMPLES:
        out.append({"role": "user", "content": R.fenced(ex)})
        out.append({"role": "assistant", "content": "\n".join(f"{c}: {v}" for c, v in found) if found else "none"})
    out.append({"role": "user", "content": R.fenced(text)})
    return out
def lparse(reply):
    reply = reply.strip()
    if reply == "none": return []
    out = []
    for line in reply.splitlines():
        m = re.match(r"^([a-z]+): (.+)$", line.strip())
        if not m or m.group(1) not in R.CATEGORIES: raise ValueError(line)
        out.append((m.group(1), m.group(2)))
    return out

models = {}
for form, msgs in (("json", R.messages), ("lines", lmessages)):
    m = Student(path, n_ctx=2048, lookup=True, status=lambda s: None)
    m.keep_head(msgs(R.HEAD_MARK), R.HEAD_MARK, None)
    m.chat(msgs("warm up: Hello, my name is Anna."), max_tokens=64)
    models[form] = (m, msgs)
rows = []
for k, it in enumerate(items):
    row = {"id": it.id, "chars": len(it.text)}
    order = ("json", "lines") if k % 2 == 0 else ("lines", "json")
    for form in order:
        m, msgs = models[form]
        t = time.perf_counter()
        g = m.chat(msgs(it.text), max_tokens=min(1024, 48 + len(it.text) // 2), temperature=0.0)
        row[form] = {"s": time.perf_counter() - t, "out": g.completion_tokens, "first": g.prompt_seconds, "text": g.text, "fin": g.finished}
        try:
            pairs = R.parse(g.text, strict=True) if form == "json" else lparse(g.text)
            row[form]["vals"] = sorted({v.casefold() for c, v in pairs}); row[form]["ok"] = True
        except Exception:
            row[form]["ok"] = False; row[form]["vals"] = []
    rows.append(row)
    print(k, row["chars"], *(f'{f} {row[f]["s"]:.2f}s {row[f]["out"]}t ok={row[f]["ok"]}' for f in ("json", "lines")), flush=True)
json.dump(rows, open(f"/work/proto/forms-{SPLIT}.json", "w"), ensure_ascii=False)
for f in ("json", "lines"):
    ss = [r[f]["s"] for r in rows]
    print(f, "p50", round(statistics.median(ss), 2), "sum", round(sum(ss), 1), "out", sum(r[f]["out"] for r in rows), "ok", sum(r[f]["ok"] for r in rows))
same = sum(r["json"]["vals"] == r["lines"]["vals"] for r in rows)
print("same values", same, "of", len(rows))
def units_hit(f):
    hit = tot = 0
    for it, r in zip(items, rows):
        for _t, u in it.pii:
            tot += 1
            if any(u.casefold() in v or v in u.casefold() for v in r[f]["vals"] if v): hit += 1
    return hit, tot
for f in ("json", "lines"): print(f, "units hit", units_hit(f))
