"""How many free (no-grammar) replies of the reader name a category not asked for, and
what the reading came to: reader-v4 (code at ce23d42), MMLU controls 60-119, 2 cores,
2026-11-28 21:27-21:33. Run from the project root, beside ../shared:
    .venv/bin/python THIS 60 > grammar-passes-60-119.txt
Each line: the control, whether the reading was complete (or its error), how many of
its replies were made under the grammar, and the categories of the free replies that
are not the reader's own."""
import sys, json, re
sys.path.insert(0, "bench")
from drag_bench.privacy import datasets
from assistant.base import config
from assistant.core.session import Session
from assistant.privacy.values import CATEGORIES
start = int(sys.argv[1])
items = [i for i in datasets.load_dataset("bundled") if i.control][start:start + 60]
s = Session(config.load())
reader = s.reader
chat = reader.model.chat
log = []
def spy(messages, **kw):
    buf = []
    inner = kw.get("on_text")
    def on(p):
        buf.append(p)
        if inner: inner(p)
    kw["on_text"] = on
    try:
        return chat(messages, **kw)
    finally:
        log.append((kw.get("schema") is not None, "".join(buf)))
reader.model.chat = spy
for it in items:
    log.clear()
    try:
        r = reader.read(it.text); out = f"complete={r.complete}"
    except Exception as e:
        out = f"ERR {str(e)[:80]}"
    odd = []
    for g, text in log:
        if g: continue
        for c in re.findall(r'\[\s*"([^"]*)"\s*,', text):
            if c not in CATEGORIES: odd.append(c)
    print(it.id, out, "grammar tries", sum(g for g, _ in log), "odd", odd, flush=True)
s.close()
