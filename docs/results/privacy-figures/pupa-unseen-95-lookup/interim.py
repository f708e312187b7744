import json, math, sys
rows=[json.loads(l) for l in open(sys.argv[1])]
ids=[r['id'] for r in rows if r['method']=='full']
methods=sorted({r['method'] for r in rows})
# only items every method finished
done={i for i in ids if sum(1 for r in rows if r['id']==i)==len(methods)}
def pct(xs,q):
    xs=sorted(xs); return xs[math.ceil(q*len(xs))-1]
def p50(xs):
    xs=sorted(xs); n=len(xs); return (xs[n//2-1]+xs[n//2])/2 if n%2==0 else xs[n//2]
print("items", len(done))
for m in methods:
    mine=[r for r in rows if r['method']==m and r['id'] in done]
    units=[v for r in mine for v in r['values'] if v['type']=='UNIT' and v['present']]
    leaked=sum(1 for v in units if v['unit']); whole=sum(1 for v in units if v['unit']=='whole')
    reads=[r['seconds']['read'] for r in mine if 'read' in r['seconds']]
    blocked=sum(1 for r in mine if r['blocked'])
    line=f"{m}: units {len(units)} leaked {100*leaked/len(units):.2f} % whole {100*whole/len(units):.2f} % refused {blocked}"
    if reads: line+=f" read p50 {p50(reads):.2f} p95 {pct(reads,0.95):.1f} sum {sum(reads):.0f} n {len(reads)}"
    print(line)
lk={r['id']:r['seconds'].get('read') for r in rows if r['method'].endswith('lookup)')}
pl={r['id']:r['seconds'].get('read') for r in rows if r['method'].endswith('plain)')}
both=[i for i in done if lk.get(i) is not None and pl.get(i) is not None]
if both:
    print("paired", len(both), "lookup/plain sum", round(sum(lk[i] for i in both)/sum(pl[i] for i in both),3), "faster", sum(lk[i]<pl[i] for i in both))
