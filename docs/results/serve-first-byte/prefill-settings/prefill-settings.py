"""Prefill speed of the 1.5B student (drag's Student) on the cached questions, llama.cpp settings varied."""
import sys, time, statistics, os
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
from pathlib import Path
import llama_cpp
from assistant.drag import answer
from assistant.models.student import Student
from drag_bench.startup import cached_questions
path = Path(sys.argv[1])
qs = [q for q, _n, _g in cached_questions(12)]
orig = llama_cpp.Llama.__init__
def run(label, **extra):
    def init(self, *a, **kw):
        kw.update(extra); orig(self, *a, **kw)
    llama_cpp.Llama.__init__ = init
    st = Student(path, n_ctx=4096)
    llama_cpp.Llama.__init__ = orig
    st.prime(answer.SYSTEM)
    firsts = []; toks = []; ps = []
    for q in qs:
        msgs = answer.build_messages(q, [], [], "none")
        t0 = time.perf_counter(); first = []
        def on_text(p):
            if not first and p.strip(): first.append(time.perf_counter() - t0)
        g = st.chat(msgs, max_tokens=3, on_text=on_text)
        firsts.append(first[0] if first else float('nan')); toks.append(g.prompt_tokens); ps.append(g.prompt_seconds)
    st.close()
    print(f"{label:20s} first p50 {statistics.median(firsts):.3f} mean {statistics.mean(firsts):.3f} | prompt_s p50 {statistics.median(ps):.3f} | {[round(x,2) for x in firsts]} tokens {toks}", flush=True)
for label, kw in [("default", {}), ("flash_attn", {"flash_attn": True}), ("ubatch128", {"n_ubatch": 128, "n_batch": 128}), ("default again", {})]:
    run(label, **kw)
