"""How the *-items.jsonl files were made from the prototypes' own output (/work/proto/*.json,
which hold the replies' values and are not stored): numbers only, with each PUPA unit
counted as hit where it and a listed value hold one another (case-folded)."""
import json
from drag_bench.privacy.datasets import load_dataset, split_items

items = {i.id: i for i in split_items(load_dataset("pupa"), "seen")}
for name, other in (("forms-seen", "lines"), ("compact-seen", "compact")):
    rows = json.load(open(f"/work/proto/{name}.json"))
    with open(f"{name}-items.jsonl", "w") as f:
        for r in rows:
            it = items[r["id"]]
            rec = {"id": r["id"], "chars": r["chars"]}
            for src, dst in (("json", "json"), ("lines", other)):
                x = r[src]
                hit = sum(
                    any(u.casefold() in v or v in u.casefold() for v in x["vals"] if v)
                    for _t, u in it.pii
                )
                rec[dst] = {"seconds": round(x["s"], 3), "tokens": x["out"], "parsed": x["ok"],
                            "values": len(x["vals"]), "units_hit": hit, "units": len(it.pii)}
            f.write(json.dumps(rec) + "\n")
rows = json.load(open("/work/proto/masked-seen-40.json"))
with open("masked-seen-items.jsonl", "w") as f:
    for r in rows:
        rec = {"id": r["id"], "chars": r["chars"]}
        for w in ("raw", "masked"):
            x = r[w]
            refused = bool(x.get("refused"))
            rec[w] = {"seconds": round(x["s"], 3), "refused": refused,
                      "complete": False if refused else x["complete"],
                      "leaked": x["leaked"], "units": x["units"]}
        f.write(json.dumps(rec) + "\n")
