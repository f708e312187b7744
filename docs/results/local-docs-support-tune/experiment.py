"""The experiment that chose filessupport.FOUND_AT_LEAST and COVERED_AT_LEAST, on the tune
half of LiHuaWorld's dev questions only (the report half is never read by it).

For each tune question: the MiniRAG-style passages (K = 5) cut to the messages that carry
the question's words (assistant.drag.filescut, files.read_tokens), the student's reply to
them (the product's prompt and settings, up to 96 tokens, with no check), the seconds it
took and the prompt's tokens, the support readings (assistant.drag.filessupport.check, and
the share of the answer's words in all passages read together), scored by the benchmark's
scorer.  The same half read whole, with the judge, is in ../local-docs-judge-tune/tune.jsonl.

Run from the project root:
    PYTHONPATH=bench .venv/bin/python THIS INDEX_DB OUT.jsonl [READ_TOKENS]
(INDEX_DB: the index.db a drag bench local-docs run built from LiHua-World)."""

import json
import sys
import time
from pathlib import Path

from drag_bench.localdocs import load_questions, part_of
from drag_bench.localdocs.scoring import score

from assistant.base import config
from assistant.core import localfiles
from assistant.core.session import Session
from assistant.drag import answer, filescut, filessupport
from assistant.drag.querywords import keywords

index_db, out = sys.argv[1], Path(sys.argv[2])
budget = int(sys.argv[3]) if len(sys.argv) > 3 else 400
qs = [
    q
    for q in load_questions(Path("../shared/data/lihuaworld/lihua_dev.csv"))
    if part_of(q["Question"]) == "tune"
]
settings = config.load(
    {"store.database": index_db, "files.learn_names": False, "student.max_tokens": 96}
)
done = set()
if out.exists():
    done = {json.loads(line)["question"] for line in out.open()}
with Session(settings) as rt, out.open("a") as fh:
    rt.preload("student", "embedder")
    st = rt.student
    for q in qs:
        if q["Question"] in done:
            continue
        t0 = time.perf_counter()
        ps = localfiles.search(rt, q["Question"], k=5, method="minirag")
        index = rt.files_index()
        cuts = filescut.cut(
            q["Question"], [p.text for p in ps], index.weight, st.count_tokens, budget
        )
        msgs = answer.build_files_messages(
            q["Question"], [(ps[c.index].label, c.text) for c in cuts]
        )
        gen = st.chat(msgs, max_tokens=96, temperature=settings.student.temperature)
        reply = gen.text.strip()
        seconds = time.perf_counter() - t0
        read = [(c.text, ps[c.index].time) for c in cuts]
        sup = filessupport.check(q["Question"], reply, read, index.weight)
        asked = filescut.question_weights(q["Question"], index.weight)
        said = filescut.stems(reply) - asked.keys() - filessupport.NOT_THE_ANSWERS
        union = set().union(*(filescut.stems(t) for t, _ in read)) if read else set()
        whole = set().union(*(filescut.stems(p.text) for p in ps)) if ps else set()
        rec = dict(
            question=q["Question"],
            type=q["Type"],
            gold=q["Gold Answer"],
            reply=reply,
            right=score(reply, q["Gold Answer"], q["Type"]).right,
            abstained=score(reply, q["Gold Answer"], q["Type"]).abstained,
            support=sup.to_dict(),
            found_all_read=round(len(said & union) / len(said), 3) if said else None,
            found_whole=round(len(said & whole) / len(said), 3) if said else None,
            read=[
                {
                    "rank": ps[c.index].rank,
                    "time": ps[c.index].time,
                    "kept": c.kept,
                    "of": c.of,
                    "text": c.text,
                }
                for c in cuts
            ],
            # The weight of each word of the question, so that choose.py can read the check
            # again from the texts read (and the words of the whole passages, as stems).
            weights={w: round(index.weight(w), 6) for w in keywords(q["Question"])},
            whole_stems=sorted(whole),
            prompt_tokens=st.count_tokens("\n".join(m["content"] for m in msgs)),
            seconds=round(seconds, 2),
        )
        fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
        fh.flush()
        print(
            q["Type"],
            rec["right"],
            rec["seconds"],
            rec["prompt_tokens"],
            sup.to_dict(),
            reply[:60],
            flush=True,
        )
