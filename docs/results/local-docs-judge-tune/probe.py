"""The experiment that chose filesjudge.NO_AT_LEAST, on the tune half of LiHuaWorld's dev
questions only (the report half was never read by it).

For each tune question: the MiniRAG-style passages (K = 5), the student's reply read
greedily (up to 96 tokens) with, at its first step, the log-probability of "Your" (the
opening of "Your files do not say."), the mean log-probability of its first 8 tokens and
of the whole reply; then the same prompt with the judge's question after it
("Do the excerpts answer this question? Reply yes or no.") and the log-probability of
"no" among yes and no (judge_no), the signal the product uses.  The reply is scored by
the benchmark's scorer.  Unanswerable (Null) questions first, then the rest.

Run from the project root: PYTHONPATH=bench .venv/bin/python THIS INDEX_DB OUT.jsonl 200
(INDEX_DB: the index.db a drag bench local-docs run built from LiHua-World).
It reads private parts of the student (its llama.cpp handle): an experiment, not code
the product runs."""

import json
import sys
import time
from pathlib import Path

import llama_cpp
import numpy as np
from drag_bench.localdocs import load_questions, part_of
from drag_bench.localdocs.scoring import score

from assistant.base import config
from assistant.core import localfiles
from assistant.core.session import Session
from assistant.drag import answer
from assistant.models.reading import LastRow as _LastRow  # in student.py when this ran

index_db, out, limit_non_null = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
qs = [
    q
    for q in load_questions(Path("../shared/data/lihuaworld/lihua_dev.csv"))
    if part_of(q["Question"]) == "tune"
]
null = [q for q in qs if q["Type"] == "Null"]
rest = [q for q in qs if q["Type"] != "Null"][:limit_non_null]
settings = config.load(
    {"store.database": index_db, "files.learn_names": False, "student.max_tokens": 96}
)
done = set()
if out.exists():
    done = {json.loads(l)["question"] for l in out.open()}
with Session(settings) as rt, out.open("a") as fh:
    rt.preload("student", "embedder")
    st = rt.student
    llm = st._llm
    fmt = st._formatter()
    your = llm.tokenize(b"Your", add_bos=False)[0]
    yes_ids = [llm.tokenize(w.encode(), add_bos=False)[0] for w in ("yes", "Yes")]
    no_ids = [llm.tokenize(w.encode(), add_bos=False)[0] for w in ("no", "No")]

    def first_row(messages, n=8):
        f = fmt(messages=messages)
        toks = llm.tokenize(f.prompt.encode(), add_bos=not f.added_special, special=True)
        last = _LastRow()
        rows = []
        written = []
        lps = []
        steps = llm.generate(
            toks,
            temp=0.0,
            repeat_penalty=1.0,
            logits_processor=llama_cpp.LogitsProcessorList([last]),
        )
        for t in steps:
            if not rows:
                rows.append(last.row.copy())
            if llama_cpp.llama_vocab_is_eog(llama_cpp.llama_model_get_vocab(llm.model), t):
                break
            written.append(t)
            lps.append(float(last.row[t]))
            if len(written) >= n:
                break
        steps.close()
        return rows[0], llm.detokenize(written).decode("utf-8", "replace"), lps, len(toks)

    for q in null + rest:
        if q["Question"] in done:
            continue
        t0 = time.perf_counter()
        ps = localfiles.search(rt, q["Question"], k=5, method="minirag")
        msgs = answer.build_files_messages(q["Question"], [(p.label, p.text) for p in ps])
        row, text, lps, n = first_row(msgs, n=96)
        t1 = time.perf_counter()
        judge = [
            dict(msgs[0]),
            {
                "role": "user",
                "content": msgs[1]["content"]
                + "\n\nDo the excerpts answer this question? Reply yes or no.",
            },
        ]
        jrow, jtext, _, _ = first_row(judge, n=1)
        t2 = time.perf_counter()
        y = np.logaddexp.reduce([jrow[i] for i in yes_ids])
        no = np.logaddexp.reduce([jrow[i] for i in no_ids])
        rec = dict(
            question=q["Question"],
            type=q["Type"],
            gold=q["Gold Answer"],
            opening=text,
            lp_your=float(row[your]),
            lp_top=float(row.max()),
            mean8=float(np.mean(lps[:8])) if lps else None,
            mean_all=float(np.mean(lps)) if lps else None,
            right=score(text, q["Gold Answer"], q["Type"]).right,
            min8=float(min(lps)) if lps else None,
            judge_no=float(no - np.logaddexp(y, no)),
            judge_text=jtext,
            prompt_tokens=n,
            s_answer=round(t1 - t0, 2),
            s_judge=round(t2 - t1, 2),
        )
        fh.write(json.dumps(rec) + "\n")
        fh.flush()
        print(
            q["Type"],
            round(rec["lp_your"], 2),
            round(rec["judge_no"], 2),
            rec["mean8"] and round(rec["mean8"], 2),
            rec["s_answer"],
            rec["s_judge"],
            text[:50],
            flush=True,
        )
