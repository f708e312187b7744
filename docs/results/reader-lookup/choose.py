import csv, sys, time
from assistant.models import modelfiles, lookup
from assistant.models.student import Student
from assistant.privacy import reader as R
path, _ = modelfiles.resolve("qwen2.5-coder-0.5b-instruct")
m = Student(path, n_ctx=2048)
m.keep_head(R.head(), R.HEAD_MARK, None)
rows = list(csv.DictReader(open("/work/shared/data/pupa/PUPA_TNB.csv")))
from drag_bench.privacy.datasets import pupa_seen
rows = [r for r in rows if len(r["user_query"]) < 1500 and pupa_seen(r["conversation_hash"])][:12]
sr = R.SpanReader(m, common=lambda w: False)
def run():
    t=time.perf_counter(); out=[]
    for r in rows: out.append(sorted((f.start,f.end) for f in sr.read(r["user_query"]).findings))
    return time.perf_counter()-t, out
m.lookup=False; base, bo = run(); print("off", round(base,1), flush=True)
for c in sys.argv[1:]:
    if c == "off":
        m.lookup=False; t, o = run(); print("off", round(t,1), "same", sum(x==y for x,y in zip(o,bo)), flush=True); continue
    m.lookup=True
    a,b,cmin = map(int, c.split(","))
    lookup.NGRAM, lookup.DRAFT, lookup.NGRAM_MIN = a,b,cmin
    t, o = run(); print(c, round(t,1), "same", sum(x==y for x,y in zip(o,bo)), [i for i,(x,y) in enumerate(zip(o,bo)) if x!=y], flush=True)
