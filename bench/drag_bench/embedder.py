"""The embedder's two backends side by side: ONNX Runtime (the default) and
sentence-transformers on torch (the ``[torch]`` extra), in one run on one machine.

    drag bench embedder [--sentences 1000] [--queries 100] [--json]

For each backend, in a fresh process: cold start (import, load, first vector).  Then, in
this process: per-query time (one question, and a question's n-grams as the offline
recall embeds them), throughput on ``--sentences`` bundled benchmark questions, and the
agreement of the vectors (cosine per sentence) and of rankings (each ARC question's
options among its neighbours', ordered by :func:`assistant.drag.ranking.rank_texts`).  Without
sentence-transformers installed, ONNX Runtime's figures are printed alone.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from assistant.base.errors import DragError
from assistant.drag import querywords
from assistant.drag.ranking import rank_texts
from assistant.models.embedder import OnnxEmbedder, SentenceEmbedder, load
from drag_bench import arguments
from drag_bench.mc import MCQuestion, bundled, load_arc

BACKENDS = ("onnx", "torch")

_COLD = (
    "import time; t = time.perf_counter(); "
    "from assistant.models.embedder import load; e = load(backend={backend!r}); e.embed(['x']); "
    "print(time.perf_counter() - t)"
)


def questions() -> list[MCQuestion]:
    names = ("arc_challenge_first200", "arc_challenge_dev200", "mmlu_sample", "medmcqa_sample")
    return [q for name in names for q in load_arc(bundled(name + ".jsonl"))]


def cold_start(backend: str) -> float:
    """Seconds from a fresh interpreter to the first vector."""
    done = subprocess.run(
        [sys.executable, "-c", _COLD.format(backend=backend)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise DragError(f"the {backend} backend did not start: {done.stderr.strip()[-300:]}")
    return float(done.stdout.strip().splitlines()[-1])


def median_ms(call: Callable[[], object], inputs: int) -> float:
    times = []
    for _ in range(inputs):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 2)


def measure(
    embedder: OnnxEmbedder | SentenceEmbedder, items: Sequence[MCQuestion], sentences: list[str]
) -> dict[str, Any]:
    embedder.embed(["warm up"])
    stems = iter(q.question for q in items)
    grams = iter(querywords.ngrams(q.text()) for q in items)
    per_query = median_ms(lambda: embedder.embed([next(stems)]), len(items))
    per_ngrams = median_ms(lambda: embedder.embed(next(grams)), len(items))
    started = time.perf_counter()
    vectors = embedder.embed(sentences)
    seconds = time.perf_counter() - started
    return {
        "query_ms_p50": per_query,
        "ngrams_ms_p50": per_ngrams,
        "sentences_per_s": round(len(sentences) / seconds, 1),
        "vectors": vectors,
    }


def orders(
    embedder: OnnxEmbedder | SentenceEmbedder, items: Sequence[MCQuestion]
) -> list[list[int]]:
    """For each ARC question, its options and the next two questions' options, ranked."""
    out = []
    for i, q in enumerate(items):
        pool = [text for n in range(3) for _label, text in items[(i + n) % len(items)].options]
        out.append([r.index for r in rank_texts(q.question, pool, embedder)])
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = arguments("embedder", __doc__)
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=100, help="questions timed one by one")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    items = questions()
    sentences = [q.question for q in items][: args.sentences]
    queries = items[: args.queries]
    arc = items[:200]
    rows: dict[str, dict[str, Any]] = {}
    ranked: dict[str, list[list[int]]] = {}
    try:
        for backend in BACKENDS:
            try:
                embedder = load(backend=backend)
            except DragError as exc:
                if backend == "onnx":
                    raise
                print(f"{backend}: not measured ({exc})", file=sys.stderr)
                continue
            row = measure(embedder, queries, sentences)
            ranked[backend] = orders(embedder, arc)
            del embedder
            row["cold_start_s"] = round(cold_start(backend), 2)
            rows[backend] = row
            print(f"{backend}: measured", file=sys.stderr, flush=True)
    except DragError as exc:
        print(f"drag bench embedder: {exc}", file=sys.stderr)
        return 1
    report: dict[str, Any] = {
        "sentences": len(sentences),
        "queries": len(queries),
        "backends": {b: {k: v for k, v in r.items() if k != "vectors"} for b, r in rows.items()},
    }
    if "torch" in rows:
        cos = np.sum(rows["onnx"]["vectors"] * rows["torch"]["vectors"], axis=1)
        same = [a == b for a, b in zip(ranked["onnx"], ranked["torch"], strict=True)]
        top5 = [a[:5] == b[:5] for a, b in zip(ranked["onnx"], ranked["torch"], strict=True)]
        report["agreement"] = {
            "cosine_min": round(float(cos.min()), 6),
            "cosine_mean": round(float(cos.mean()), 6),
            "below_0_99": int((cos < 0.99).sum()),
            "rankings": len(same),
            "same_order": sum(same),
            "same_top5": sum(top5),
        }
        o, t = rows["onnx"], rows["torch"]
        report["torch_over_onnx"] = {
            k: round(t[k] / o[k], 2) for k in ("query_ms_p50", "ngrams_ms_p50", "cold_start_s")
        } | {"sentences_per_s": round(o["sentences_per_s"] / t["sentences_per_s"], 2)}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print("| backend | cold start s | one query ms p50 | n-grams ms p50 | sentences/s |")
    print("|---|---:|---:|---:|---:|")
    for b, r in report["backends"].items():
        print(
            f"| {b} | {r['cold_start_s']} | {r['query_ms_p50']} | {r['ngrams_ms_p50']} | "
            f"{r['sentences_per_s']} |"
        )
    if "agreement" in report:
        a, x = report["agreement"], report["torch_over_onnx"]
        print(
            f"\nONNX Runtime is {x['query_ms_p50']}x faster per query, {x['ngrams_ms_p50']}x on "
            f"n-grams, {x['sentences_per_s']}x in throughput, {x['cold_start_s']}x at cold start."
        )
        print(
            f"Cosine per sentence: min {a['cosine_min']}, mean {a['cosine_mean']}, "
            f"{a['below_0_99']} of {report['sentences']} below 0.99. Rankings: "
            f"{a['same_order']} of {a['rankings']} in the same order, "
            f"{a['same_top5']} with the same top 5."
        )
    return 0
